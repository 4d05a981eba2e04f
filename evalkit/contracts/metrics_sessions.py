"""The metrics table collapsed to one row per (arm, metric, session): the report's view of the
run's aggregate (:mod:`evalkit.contracts.aggregate`).

The report's tables and figures rest on session means (the resampling unit) and on counts of
values and errors; holding the ~1M event-level rows of a large run for them was its memory peak.
:func:`session_table` keeps, per (arm, metric, session): ``rows``, ``errors`` (rows without a
usable value), ``n`` and ``sum`` of the values, and ``value`` = ``sum / n``, the session mean
(NaN, with ``error`` set, when every row failed). Frames of this shape work wherever a section
takes per-session means of error-free rows, as of the full table.

The keys are categoricals whose categories are the sorted strings: comparisons, ``isin`` and
``.str`` work as on strings, and a groupby over them needs ``observed=True``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from scipy import stats

from evalkit.contracts import aggregate
from evalkit.contracts.metrics import COLUMNS
from evalkit.contracts.metrics_stream import read_where

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


def session_table(
    path: str | os.PathLike, event_metrics: tuple[str, ...] = ()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The metrics file as session rows (:data:`SESSION_COLUMNS`, from the run's aggregate,
    :mod:`evalkit.contracts.aggregate`), and the event-level rows (arm, session, metric, value,
    without an error) of ``event_metrics``, for a statistic that is not a mean (a median). A file
    that is not a metrics table raises ValueError naming it, and the column and row at fault."""
    p = Path(path)
    try:
        pf = pq.ParquetFile(p)
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        raise ValueError(f"{p}: cannot read the metrics table: {type(e).__name__}: {e}") from None
    _check_schema(p, pf.schema_arrow)
    # Only the columns kept, the keys read as dictionaries: pandas makes them categoricals without
    # a string object per row (at 800 sessions those were most of the report's reading peak).
    agg = aggregate.load(p, [*KEYS, "rows", "errors", "n", "sum"], encoded=True)
    df = aggregate.frame(agg)
    del agg
    for c in KEYS:  # categoricals over the sorted strings: held once each, ordered as strings
        df[c] = pd.Categorical(df[c], categories=sorted(df[c].unique()))
    df["sum"] = df["sum"].where(df["n"] > 0)
    df["error"] = None
    df.loc[df["n"] == 0, "error"] = "no value without an error in this session"
    ev_cols = ["arm", "session", "metric", "value"]
    events = pd.DataFrame(columns=ev_cols)
    if event_metrics:
        t = read_where(p, {"metric": list(event_metrics)}, [*ev_cols, "error"])
        ok = pc.and_(pc.is_null(t.column("error")), pc.is_valid(t.column("value")))
        events = t.filter(ok).select(ev_cols).to_pandas()
    return df[SESSION_COLUMNS].reset_index(drop=True), events


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
