"""The metrics table collapsed to one row per (arm, metric, session), read a row group at a time.

The report's tables and figures rest on session means (the resampling unit) and on counts of
values and errors; holding the ~1M event-level rows of a large run for them was its memory peak.
:func:`session_table` keeps, per (arm, metric, session): ``rows``, ``errors`` (rows with an error
text), ``n`` and ``sum`` of the values without one, and ``value`` = ``sum / n``, the session mean
(NaN, with ``error`` set, when every row failed). Frames of this shape work wherever a section
takes per-session means of error-free rows, as of the full table.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalkit.metrics import COLUMNS

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
    parts, events, offset = [], [], 0
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
        parts.append(
            t.group_by(KEYS, use_threads=False).aggregate(
                [("v", "count"), ("v", "sum"), ("failed", "sum"), ("failed", "count")]
            )
        )
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
    # A session's rows can straddle two row groups: add the partial sums up.
    df = pa.concat_tables(parts).to_pandas()
    df = df.groupby(KEYS, sort=True, observed=True, as_index=False).sum(min_count=1)
    df = df.rename(columns={"v_count": "n", "v_sum": "sum", "failed_sum": "errors", "failed_count": "rows"})
    df["n"] = df["n"].astype("int64")
    df["sum"] = df["sum"].where(df["n"] > 0)
    df["value"] = df["sum"] / df["n"].where(df["n"] > 0)
    df["error"] = None
    df.loc[df["n"] == 0, "error"] = "no value without an error in this session"
    ev = (
        pa.concat_tables(events).to_pandas()
        if events
        else pd.DataFrame(columns=["arm", "session", "metric", "value"])
    )
    return df[SESSION_COLUMNS], ev
