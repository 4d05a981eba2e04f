"""The metrics table collapsed to one row per (arm, metric, session), read a row group at a time.

The report's tables and figures rest on session means (the resampling unit) and on counts of
values and errors; holding the ~1M event-level rows of a large run for them was its memory peak.
:func:`session_table` keeps, per (arm, metric, session): ``rows``, ``errors`` (rows with an error
text), ``n`` and ``sum`` of the values without one, and ``value`` = ``sum / n``, the session mean
(NaN, with ``error`` set, when every row failed). Frames of this shape work wherever a section
takes per-session means of error-free rows, as of the full table.

The keys are categoricals whose categories are the sorted strings: comparisons, ``isin`` and
``.str`` work as on strings, and a groupby over them needs ``observed=True``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from scipy import stats

from evalkit.contracts.metrics import COLUMNS

KEYS = ["arm", "metric", "session"]
SESSION_COLUMNS = [*KEYS, "value", "n", "sum", "rows", "errors", "error"]


def _text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


_TYPES = {
    "run": _text,
    "arm": _text,
    "session": _text,
    "metric": _text,
    "error": lambda t: _text(t) or pa.types.is_null(t),  # a table without errors may say so
    "event": pa.types.is_integer,
    "round": pa.types.is_integer,
    "replicate": pa.types.is_integer,
    "value": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
}


def _check_schema(p: Path, schema: pa.Schema) -> None:
    missing = [c for c in COLUMNS if c not in schema.names]
    if missing:
        raise ValueError(f"{p}: missing column(s) {', '.join(missing)}")
    for c in COLUMNS:
        t = schema.field(c).type
        t = t.value_type if pa.types.is_dictionary(t) else t
        if not _TYPES[c](t):
            raise ValueError(f"{p}: column {c} has type {t}, which the metrics table does not allow")


# Arrow's aggregate column -> the session table's column.
_AGGREGATES = {"v_count": "n", "v_sum": "sum", "failed_sum": "errors", "failed_count": "rows"}


class _Codes:
    """One key column's distinct strings, each given an integer code the first time it is seen.

    The keys are held once each, not once per row: a table of Python strings cost ~130 bytes a
    row and left freed string objects scattered over the heap, so the report's RSS after loading
    grew by over three times the table's own size with the corpus (+96 MB for 28 MB at 800 sessions)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def encode(self, column: pa.ChunkedArray) -> np.ndarray:
        d = pc.dictionary_encode(column).combine_chunks()
        lookup = np.fromiter(
            (self.index.setdefault(v, len(self.index)) for v in d.dictionary.to_pylist()),
            dtype=np.int32,
            count=len(d.dictionary),
        )
        return lookup[d.indices.to_numpy(zero_copy_only=False)]

    def sorted_categories(self) -> tuple[list[str], np.ndarray]:
        """The strings in sorted order, and each code's rank in it."""
        names = list(self.index)
        order = sorted(range(len(names)), key=names.__getitem__)
        rank = np.empty(len(names), dtype=np.int32)
        rank[order] = np.arange(len(names), dtype=np.int32)
        return [names[i] for i in order], rank


def _combine(parts: list[dict[str, np.ndarray]], codes: dict[str, _Codes]) -> pd.DataFrame:
    """The row groups' partial sums as one frame, sorted by (arm, metric, session), with the keys
    as categoricals over sorted strings (so they order as the strings do)."""
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    parts.clear()
    cats = {c: codes[c].sorted_categories() for c in KEYS}
    for c in KEYS:
        cols[c] = cats[c][1][cols[c]]
    # Sorted without a pandas groupby over every row: its factorizing held ~6x the table.
    order = np.lexsort([cols[c] for c in reversed(KEYS)])
    for k in list(cols):  # one column at a time: the unsorted copy goes as its sorted one comes
        cols[k] = cols[k][order]
    del order
    new = np.zeros(len(cols["n"]), dtype=bool)
    new[:1] = True
    for c in KEYS:
        new[1:] |= cols[c][1:] != cols[c][:-1]
    # A session's rows can straddle row groups: add those few partial sums up.
    split = ~new | np.append(~new[1:], False)
    sums = (
        pd.DataFrame({k: cols[k][split] for k in _AGGREGATES.values()}, index=(np.cumsum(new) - 1)[split])
        .groupby(level=0)
        .sum(min_count=1)
    )
    df = pd.DataFrame(index=pd.RangeIndex(int(new.sum())))
    for k in list(cols):
        v = cols.pop(k)[new]
        if k in cats:
            df[k] = pd.Categorical.from_codes(v, categories=cats[k][0])
        else:
            df[k] = v
            if len(sums):
                df.loc[sums.index, k] = sums[k].to_numpy()
    df["n"] = df["n"].astype("int64")
    df["rows"] = df["rows"].astype("int64")
    df["errors"] = df["errors"].astype("int64")
    df["sum"] = df["sum"].where(df["n"] > 0)
    df["value"] = df["sum"] / df["n"].where(df["n"] > 0)
    df["error"] = None
    df.loc[df["n"] == 0, "error"] = "no value without an error in this session"
    return df[SESSION_COLUMNS]


def session_table(
    path: str | os.PathLike, event_metrics: tuple[str, ...] = ()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The metrics file as session rows (:data:`SESSION_COLUMNS`), and the event-level rows
    (arm, session, metric, value, without an error) of ``event_metrics``, for a statistic that
    is not a mean (a median). A file that is not a metrics table raises ValueError naming it,
    and the column and row at fault."""
    p = Path(path)
    try:
        pf = pq.ParquetFile(p)
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        raise ValueError(f"{p}: cannot read the metrics table: {type(e).__name__}: {e}") from None
    _check_schema(p, pf.schema_arrow)
    codes = {c: _Codes() for c in KEYS}
    parts: list[dict[str, np.ndarray]] = []
    events, offset = [], 0
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i, columns=[*KEYS, "value", "error"])
        for c in KEYS:
            if t.column(c).null_count:
                row = offset + pc.index(pc.is_null(t.column(c)), True).as_py()
                raise ValueError(f"{p}: column {c}, row {row}: None is not a valid value")
        offset += t.num_rows
        value = pc.cast(t.column("value"), pa.float64())
        failed = pc.is_valid(t.column("error"))
        ok_value = pc.if_else(pc.or_(failed, pc.is_null(value)), pa.scalar(None, pa.float64()), value)
        t = pa.table(
            {
                **{c: t.column(c).cast(pa.string()) for c in KEYS},
                "v": ok_value,
                "failed": pc.cast(failed, pa.int64()),
            }
        )
        g = t.group_by(KEYS, use_threads=False).aggregate(
            [("v", "count"), ("v", "sum"), ("failed", "sum"), ("failed", "count")]
        )
        part = {c: codes[c].encode(g.column(c)) for c in KEYS}
        for src, dst in _AGGREGATES.items():
            v = g.column(src).to_numpy(zero_copy_only=False)
            part[dst] = v if dst == "sum" else v.astype(np.int32)  # a session's row counts fit
        parts.append(part)
        if event_metrics:
            keep = pc.and_(pc.is_in(t.column("metric"), pa.array(event_metrics)), pc.is_valid(t.column("v")))
            events.append(
                t.filter(keep)
                .select(["arm", "session", "metric", "v"])
                .rename_columns(["arm", "session", "metric", "value"])
            )
    if not parts:
        return pd.DataFrame(columns=SESSION_COLUMNS), pd.DataFrame(
            columns=["arm", "session", "metric", "value"]
        )
    df = _combine(parts, codes)
    ev = (
        pa.concat_tables(events).to_pandas()
        if events
        else pd.DataFrame(columns=["arm", "session", "metric", "value"])
    )
    return df, ev


def valued_rows(metrics: pd.DataFrame, keep: pd.Series) -> pd.DataFrame:
    """The rows ``keep`` selects that hold a value. One mask, so no copy of the whole table is
    made on the way (the report's table has a row per session per metric: 15 MB at 800 sessions)."""
    return metrics[keep & metrics["error"].isna()]


def arm_summary(metrics: pd.DataFrame, metric: str, scale: float = 1.0) -> pd.DataFrame:
    """Per arm: mean of per-session means (scaled), 95% t interval half-width, sessions."""
    ok = valued_rows(metrics, metrics["metric"] == metric) if len(metrics) else metrics
    per = ok.groupby(["arm", "session"], observed=True)["value"].mean() / scale
    rows = []
    for arm, vals in per.groupby(level="arm", observed=True):
        v = vals.to_numpy(dtype=float)
        half = (
            float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
            if len(v) > 1
            else math.nan
        )
        rows.append({"arm": arm, "mean": float(v.mean()), "half": half, "n": len(v)})
    return pd.DataFrame(rows, columns=["arm", "mean", "half", "n"]).set_index("arm")
