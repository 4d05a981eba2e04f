"""The tidy metrics table: one row per (run, arm, session, event, round, replicate, metric).

Everything downstream (statistics, plots, notebooks) reads this table. A scorer that fails
records ``value = NaN`` with the reason in ``error``; it never writes a zero in its place.
Session-level metrics (computed over a whole session, not one event) use ``event = -1`` and
``round = -1``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

COLUMNS = ["run", "arm", "session", "event", "round", "replicate", "metric", "value", "error"]
SESSION_LEVEL = -1


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


def to_frame(rows: Iterable[MetricRow | tuple]) -> pd.DataFrame:
    """Rows (or their :meth:`MetricRow.as_tuple`) to the canonical DataFrame with stable dtypes and order."""
    df = pd.DataFrame([r if isinstance(r, tuple) else r.as_tuple() for r in rows], columns=COLUMNS)
    return normalize(df)


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Canonical dtypes and row order, so the same rows always write the same bytes."""
    df = df.astype(
        {
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
    )
    return df.sort_values(["arm", "session", "event", "replicate", "metric"], kind="stable").reset_index(
        drop=True
    )


def write_metrics(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write the table as parquet, atomically."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    normalize(df[COLUMNS]).to_parquet(tmp, index=False)
    os.replace(tmp, p)


def read_metrics(path: str | os.PathLike) -> pd.DataFrame:
    return pd.read_parquet(path)


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


def replace_rows(path: str | os.PathLike, table: pd.DataFrame, owned) -> None:
    """Write ``table`` into the metrics file in place of the rows whose metric ``owned(metric)``
    claims, keeping every other stage's rows (probes and continuation share one table)."""
    p = Path(path)
    if p.exists():
        old = read_metrics(p)
        keep = old[~old["metric"].map(owned).astype(bool)]
        table = pd.concat([normalize(keep[COLUMNS]), normalize(table[COLUMNS])], ignore_index=True)
    write_metrics(table, p)
