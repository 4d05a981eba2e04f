"""The tidy metrics table: one row per (run, arm, session, event, round, replicate, metric).

Everything downstream (statistics, plots, notebooks) reads this table. A scorer that fails
records ``value = NaN`` with the reason in ``error``; it never writes a zero in its place.
Session-level metrics (computed over a whole session, not one event) use ``event = -1`` and
``round = -1``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd
import pyarrow as pa

COLUMNS = ["run", "arm", "session", "event", "round", "replicate", "metric", "value", "error"]
SESSION_LEVEL = -1


def question_family(metric: str) -> str | None:
    """The exam a per-question metric belongs to, None for any other metric.

    An exam writes one row per question besides its score (``identifier_q:symbol:e9c9…``,
    ``judge_offline_q:<id>``, ``exam_q:<bank>/<id>``): the scorecard pairs them arm against arm.
    Their names are unique to a session, so anything listed per metric name (health checks,
    tables of means) grows with the corpus unless it takes them as one family: ``identifier_q``.
    """
    head, sep, _ = metric.partition(":")
    return head if sep and head.endswith("_q") else None


def question_key(metric: str) -> str:
    """The name a metric is counted or listed under: a per-question metric as its exam's
    family, ``<family>:*``; any other metric as itself."""
    family = question_family(metric)
    return metric if family is None else f"{family}:*"


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One value of one metric (or the error that prevented it)."""

    run: str
    arm: str
    session: str
    event: int
    round: int
    replicate: int
    metric: str
    value: float
    error: str | None = None

    @classmethod
    def failed(
        cls, run: str, arm: str, session: str, event: int, round: int, replicate: int, metric: str, error: str
    ) -> MetricRow:
        """A row that records a scorer error (value NaN, never 0)."""
        return cls(run, arm, session, event, round, replicate, metric, math.nan, error)

    def as_tuple(self) -> tuple:
        """The row's fields in :data:`COLUMNS` order (what workers send back: a tuple pickles
        ~3x faster than the dataclass and unpickles ~7x faster, and a stage returns ~400k)."""
        return (
            self.run,
            self.arm,
            self.session,
            self.event,
            self.round,
            self.replicate,
            self.metric,
            self.value,
            self.error,
        )


DTYPES = {
    "run": "string",
    "arm": "string",
    "session": "string",
    "event": "int64",
    "round": "int64",
    "replicate": "int64",
    "metric": "string",
    "value": "float64",
    "error": "string",
}
ORDER = ["arm", "session", "event", "replicate", "metric"]


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Canonical dtypes and row order, so the same rows always write the same bytes."""
    return df.astype(DTYPES).sort_values(ORDER, kind="stable").reset_index(drop=True)


@cache
def arrow_schema() -> pa.Schema:
    """The metrics file's Arrow schema, with the pandas metadata a normalized frame writes."""
    return pa.Schema.from_pandas(pd.DataFrame({c: [] for c in COLUMNS}).astype(DTYPES), preserve_index=False)


def rows_to_arrow(rows: Sequence[tuple]) -> pa.Table:
    """Rows (:meth:`MetricRow.as_tuple`) as an Arrow table of the file's schema, in their order.

    What the stages hold while they collect rows: ~140 bytes a row, where the tuples take ~1 KB
    (a default-size run has ~1,300 rows a session). NaN values become nulls, as pandas writes them."""
    schema = arrow_schema()
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(COLUMNS)
    return pa.Table.from_arrays(
        [pa.array(c, type=f.type, from_pandas=True) for c, f in zip(cols, schema, strict=True)], schema=schema
    )


def read_metrics(path: str | os.PathLike, columns: list[str] | None = None) -> pd.DataFrame:
    """The metrics table (only ``columns``, when given: a reader that needs fewer holds less)."""
    return pd.read_parquet(path, columns=columns)


_TEXT = ("run", "arm", "session", "metric")
_INTS = ("event", "round", "replicate")


def load_metrics(path: str | os.PathLike) -> pd.DataFrame:
    """The metrics table, checked against the contract (columns and their types); a file that is
    not one raises ValueError naming the file, the column and the first bad row."""
    p = Path(path)
    try:
        df = pd.read_parquet(p)
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        raise ValueError(f"{p}: cannot read the metrics table: {type(e).__name__}: {e}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: missing column(s) {', '.join(missing)}")

    def first_bad(col: str, ok) -> None:
        if pd.api.types.is_string_dtype(df[col]) and not pd.api.types.is_object_dtype(df[col]):
            # A string column holds strings or missing values, so only a missing one can be bad
            # (and an error may be missing). Mapping ``ok`` over a default-size run's ~1M rows
            # made a Python object per cell.
            bad = df[col].isna() if ok(None) is False else pd.Series(False, index=df.index)
        else:
            bad = ~df[col].map(ok).astype(bool)
        if bad.any():
            i = int(bad.to_numpy().argmax())
            raise ValueError(f"{p}: column {col}, row {i}: {df[col].iloc[i]!r} is not a valid value")

    for c in _TEXT:
        first_bad(c, lambda v: isinstance(v, str))
    first_bad(
        "error", lambda v: v is None or v is pd.NA or isinstance(v, str) or (isinstance(v, float) and v != v)
    )
    for c in _INTS:
        if not pd.api.types.is_integer_dtype(df[c]):
            raise ValueError(f"{p}: column {c} has type {df[c].dtype}, expected integers")
    if not (pd.api.types.is_numeric_dtype(df["value"]) and not pd.api.types.is_bool_dtype(df["value"])):
        raise ValueError(f"{p}: column value has type {df['value'].dtype}, expected numbers")
    return df
