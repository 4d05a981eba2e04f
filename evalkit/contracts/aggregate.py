"""The run's one aggregate of the metrics table: per (arm, metric, session), mergeable sums.

Health, decide, the report and shard merge all rest on the same per-session numbers; they used to
build them in separate passes over the event-level rows. :func:`build` computes them once, a row
group at a time, and :func:`write` keeps them as ``aggregate.parquet`` in the run folder. Each row
holds:

- ``rows``: the metric's rows in that session, errors included;
- ``errors``: rows without a usable value (an error text, NaN or ±inf: never counted as a zero);
- ``n``, ``sum``, ``sumsq``: the count, sum and sum of squares of the finite values of rows
  without an error (the session mean is ``sum / n``);
- ``min``, ``max``: the least and greatest of those values (null when ``n`` is 0);
- ``not01``: how many of them are neither 0 nor 1 (a 0/1 metric's mean lies in [0, 1]).

Every column is a sum, a min or a max, so two aggregates of disjoint rows :func:`merge` into the
aggregate of their union (HELM's ``Stat.merge``): counts exactly, sums to float rounding. That is
how a session whose rows straddle two row groups is added up, and how shards are merged.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalkit.contracts.metrics import question_key

AGGREGATE_FILE = "aggregate.parquet"
KEYS = ["arm", "metric", "session"]
SCHEMA = pa.schema(
    [
        ("arm", pa.string()),
        ("metric", pa.string()),
        ("session", pa.string()),
        ("rows", pa.int64()),
        ("errors", pa.int64()),
        ("n", pa.int64()),
        ("sum", pa.float64()),
        ("sumsq", pa.float64()),
        ("min", pa.float64()),
        ("max", pa.float64()),
        ("not01", pa.int64()),
    ]
)
# column -> how two partial aggregates of it combine
_COMBINE = {
    "rows": "sum",
    "errors": "sum",
    "n": "sum",
    "sum": "sum",
    "sumsq": "sum",
    "min": "min",
    "max": "max",
    "not01": "sum",
}
# Which metrics file an aggregate was built from: a rewritten table (``evalkit score`` again, a
# continuation stage) makes it stale, and a stale aggregate is rebuilt, never read.
_STAMP = b"evalkit.metrics_file"


def empty() -> pa.Table:
    """An aggregate of no rows."""
    return SCHEMA.empty_table()


def of_rows(table: pa.Table) -> pa.Table:
    """The aggregate of metric rows (an Arrow table with arm, session, metric, value, error)."""
    if table.num_rows == 0:
        return empty()
    value = pc.cast(table.column("value"), pa.float64())
    err = table.column("error")
    failed = pc.is_valid(err) if not pa.types.is_null(err.type) else pa.repeat(False, table.num_rows)
    ok = pc.and_(pc.invert(failed), pc.is_finite(pc.fill_null(value, math.nan)))
    ok = pc.fill_null(ok, False)
    v = pc.if_else(ok, value, pa.scalar(None, pa.float64()))
    not01 = pc.and_(ok, pc.and_(pc.not_equal(value, 0.0), pc.not_equal(value, 1.0)))
    t = pa.table(
        {
            **{c: pc.cast(table.column(c), pa.string()) for c in KEYS},
            "bad": pc.cast(pc.invert(ok), pa.int64()),
            "v": v,
            "v2": pc.multiply(v, v),
            "odd": pc.cast(pc.fill_null(not01, False), pa.int64()),
        }
    )
    g = t.group_by(KEYS, use_threads=False).aggregate(
        [
            ("bad", "count"),
            ("bad", "sum"),
            ("v", "count"),
            ("v", "sum", pc.ScalarAggregateOptions(min_count=0)),
            ("v2", "sum", pc.ScalarAggregateOptions(min_count=0)),
            ("v", "min"),
            ("v", "max"),
            ("odd", "sum"),
        ]
    )
    cols = ["bad_count", "bad_sum", "v_count", "v_sum", "v2_sum", "v_min", "v_max", "odd_sum"]
    return _sorted(pa.table([*(g.column(c) for c in KEYS), *(g.column(c) for c in cols)], schema=SCHEMA))


def merge(*parts: pa.Table) -> pa.Table:
    """The aggregate of the union of the rows behind ``parts`` (their counts, sums and sums of
    squares added, their minima and maxima taken)."""
    parts = tuple(p for p in parts if p.num_rows)
    if not parts:
        return empty()
    t = pa.concat_tables([p.cast(SCHEMA) for p in parts])
    if len(parts) == 1:
        return _sorted(t)
    g = t.group_by(KEYS, use_threads=False).aggregate(
        [
            (c, how, pc.ScalarAggregateOptions(min_count=0)) if how == "sum" else (c, how)
            for c, how in _COMBINE.items()
        ]
    )
    return _sorted(
        pa.table(
            [*(g.column(c) for c in KEYS), *(g.column(f"{c}_{h}") for c, h in _COMBINE.items())],
            schema=SCHEMA,
        )
    )


def _sorted(t: pa.Table) -> pa.Table:
    return t.take(pc.sort_indices(t, sort_keys=[(k, "ascending") for k in KEYS])).combine_chunks()


def of_frame(df: pd.DataFrame) -> pa.Table:
    """The aggregate of metric rows held as a pandas frame (tests, the gate's small tables)."""
    cols = {c: df[c].astype(str).to_numpy(dtype=object) for c in KEYS}
    value = pd.to_numeric(df["value"], errors="coerce").to_numpy(dtype=float)
    has_error = df["error"].notna().to_numpy()
    error = np.where(has_error, df["error"].astype(str).to_numpy(dtype=object), None)
    return of_rows(
        pa.table(
            {
                **cols,
                "value": pa.array(value, type=pa.float64(), from_pandas=False),
                "error": pa.array(error, type=pa.string()),
            }
        )
    )


def build(metrics: str | os.PathLike) -> pa.Table:
    """The aggregate of a metrics file, read a row group at a time (the rows are never held whole)."""
    try:
        pf = pq.ParquetFile(metrics)
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        raise ValueError(f"{metrics}: cannot read the metrics table: {type(e).__name__}: {e}") from None
    # A metrics file is in canonical order (arm, then session, ...): a session's rows end before the
    # next session's begin, so every session of a row group but its last is complete and leaves the
    # merge for good; only the last one's partial sums are carried into the next group. An arm's
    # complete sessions are sorted (by metric, then session) once the file has moved past the arm:
    # the sorted arms, in order, are the aggregate, with no sort of the whole. Merging everything
    # read so far again and again (a table that grows with the corpus, hashed and sorted each
    # time) made this the run's largest stage at 800 sessions. A file in another order is merged
    # whole at the end (:func:`merge`), as correct and no leaner.
    done: list[pa.Table] = []  # the aggregate of the arms the file has moved past, each sorted
    open_: list[pa.Table] = []  # complete sessions of the arms not yet past
    carry = empty()  # the partial sums of the last (arm, session) read
    unsorted: list[pa.Table] = []
    last: tuple[str, str] | None = None
    offset = 0
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i, columns=["arm", "session", "metric", "value", "error"], use_threads=False)
        for c in KEYS:
            if t.column(c).null_count:
                row = offset + pc.index(pc.is_null(t.column(c)), True).as_py()
                raise ValueError(f"{metrics}: column {c}, row {row}: None is not a valid value")
        offset += t.num_rows
        if not t.num_rows:
            continue
        if unsorted or not _in_order(t, last):
            unsorted.append(of_rows(t))
            continue
        arm, session = t.column("arm"), t.column("session")
        last = (arm[-1].as_py(), session[-1].as_py())
        # The group's last session may go on in the next group: its rows are the group's tail.
        other = pc.or_(pc.not_equal(arm, last[0]), pc.not_equal(session, last[1]))
        cut = int(np.flatnonzero(other.to_numpy(zero_copy_only=False)).max(initial=-1)) + 1
        # A key's rows all lie in one of head and tail, so each key sums its rows as of_rows(t) would;
        # merge() adds the carried sums first, then this group's: the order a merge of every group's
        # partial aggregate adds them in, so the sums come out the same to the last bit.
        tail = of_rows(t.slice(cut))
        if cut:
            head = of_rows(t.slice(0, cut))
            open_.append(merge(carry, head) if carry.num_rows else head)
            carry = tail
        elif carry.num_rows and _key_of(carry) == last:
            carry = merge(carry, tail)
        else:  # the carried session ended with the last group
            open_.append(carry)
            carry = tail
        if any(p.num_rows and p.column("arm")[0].as_py() < last[0] for p in open_):
            # Each part is sorted by arm first: the arms the file is past are a prefix of it.
            cuts = [int(pc.sum(pc.less(p.column("arm"), last[0])).as_py() or 0) for p in open_]
            past = pa.concat_tables([p.slice(0, k) for p, k in zip(open_, cuts, strict=True)])
            done.append(_encoded(_sorted(past)))
            open_ = [p.slice(k) for p, k in zip(open_, cuts, strict=True) if p.num_rows > k]
            del past  # its parts, sorted into done
    if unsorted:
        return merge(*done, *open_, carry, *unsorted)
    rest = pa.concat_tables([*open_, carry])
    del open_, carry  # let go of the last arm's parts once they are sorted (only the sort holds them)
    done.append(_sorted(rest))
    del rest
    # Decoded one arm at a time, each arm's encoded copy let go as its strings are made.
    return pa.concat_tables([done.pop(0).cast(SCHEMA) for _ in range(len(done))])


def _encoded(t: pa.Table) -> pa.Table:
    """``t`` with its key columns as dictionaries: a finished arm waits for the rest of the file
    holding each metric and session name once, not a string per row."""
    for c in KEYS:
        t = t.set_column(t.schema.get_field_index(c), c, pc.dictionary_encode(t.column(c)))
    return t


def _key_of(agg: pa.Table) -> tuple[str, str]:
    """The (arm, session) of an aggregate of one session's rows."""
    return agg.column("arm")[0].as_py(), agg.column("session")[0].as_py()


def _in_order(t: pa.Table, last: tuple[str, str] | None) -> bool:
    """Whether the rows of ``t`` are in (arm, session) order and start at or after ``last``."""
    arm, session = t.column("arm"), t.column("session")
    if last is not None and (arm[0].as_py(), session[0].as_py()) < last:
        return False
    if t.num_rows < 2:
        return True
    a0, a1 = arm.slice(0, t.num_rows - 1), arm.slice(1)
    s0, s1 = session.slice(0, t.num_rows - 1), session.slice(1)
    ok = pc.or_(pc.less(a0, a1), pc.and_(pc.equal(a0, a1), pc.less_equal(s0, s1)))
    return pc.all(ok).as_py()


def _stamp(metrics: Path) -> bytes:
    """The metrics file's digest: any rewrite of it (a value changed in place included) is noticed.
    Hashing is cheap next to reading the rows (~30 MB at 800 sessions)."""
    with open(metrics, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest().encode()


def path_of(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / AGGREGATE_FILE


def write(run_dir: str | os.PathLike, agg: pa.Table | None = None) -> pa.Table:
    """Write the run's ``aggregate.parquet`` (built from its ``metrics.parquet`` unless given), stamped
    with the metrics file it describes; returns it."""
    run = Path(run_dir)
    metrics = run / "metrics.parquet"
    agg = build(metrics) if agg is None else agg
    stamped = agg.cast(SCHEMA).replace_schema_metadata({_STAMP: _stamp(metrics)})
    tmp = path_of(run).with_name(AGGREGATE_FILE + ".tmp")
    pq.write_table(stamped, tmp)
    os.replace(tmp, path_of(run))
    return agg


def load(path: str | os.PathLike, columns: list[str] | None = None, encoded: bool = False) -> pa.Table:
    """The aggregate of a run folder's ``metrics.parquet`` (or of the metrics file ``path``): the
    ``aggregate.parquet`` beside it when that describes it, else built from it (an older run
    folder, or a table rewritten since).

    ``columns``: only these. ``encoded``: the key columns as dictionaries (each distinct arm,
    metric and session held once, a row holding its index): a reader that only groups or pairs
    rows need not hold a string per row."""
    p = Path(path)
    metrics = p if p.suffix == ".parquet" else p / "metrics.parquet"
    p = path_of(metrics.parent)
    columns = columns or SCHEMA.names
    t = None
    if p.is_file() and metrics.is_file():
        try:
            keys = [c for c in KEYS if c in columns] if encoded else None
            pf = pq.ParquetFile(p, read_dictionary=keys)
            if (pf.schema_arrow.metadata or {}).get(_STAMP) == _stamp(metrics):
                # One thread: a threaded read's scratch memory grew with the file (about +40% RSS
                # over the table itself at 200 sessions); the file is small enough to read serially.
                t = pf.read(columns=columns, use_threads=False).replace_schema_metadata(None)
        except Exception:  # a damaged aggregate is rebuilt from the table, as a stale one is
            t = None
    if t is None:
        t = (build(metrics) if metrics.is_file() else empty()).select(columns)
    t = t.cast(pa.schema([_field(c, encoded) for c in columns]))
    return t.unify_dictionaries() if encoded else t


def _field(name: str, encoded: bool) -> pa.Field:
    f = SCHEMA.field(name)
    return f.with_type(pa.dictionary(pa.int32(), pa.string())) if encoded and name in KEYS else f


# --------------------------------------------------------------------------- what readers take


def frame(agg: pa.Table) -> pd.DataFrame:
    """The aggregate as a pandas frame, plus ``value`` = the session mean (NaN when no value)."""
    df = agg.to_pandas()
    df["value"] = df["sum"] / df["n"].where(df["n"] > 0)
    return df


def summary(agg: pa.Table) -> list[dict]:
    """Per (arm, metric) with a value in some session: sessions with a value, the mean of their
    session means, rows (values) and rows without a usable value (errors)."""
    return summary_of(frame(agg)) if agg.num_rows else []


def summary_of(df: pd.DataFrame) -> list[dict]:
    """:func:`summary` of the aggregate as a frame (:func:`frame`, or the report's session table)."""
    if not len(df):
        return []
    valued = df[df["n"] > 0]
    means = valued.groupby(["arm", "metric"], sort=True, observed=True)["value"].agg(["count", "sum"])
    totals = df.groupby(["arm", "metric"], sort=True, observed=True)[["rows", "errors"]].sum()
    return [
        {
            "arm": str(arm),
            "metric": str(metric),
            "sessions": int(k),
            "mean": float(total / k),
            "values": int(totals.at[(arm, metric), "rows"]),
            "errors": int(totals.at[(arm, metric), "errors"]),
        }
        for (arm, metric), k, total in zip(means.index, means["count"], means["sum"], strict=True)
    ]


def pairs(agg: pa.Table) -> set[tuple[str, str]]:
    """The (arm, metric) pairs with rows."""
    t = agg.select(["arm", "metric"]).group_by(["arm", "metric"]).aggregate([])
    return set(zip(t["arm"].to_pylist(), t["metric"].to_pylist(), strict=True))


def zero_one(agg: pa.Table) -> set[str]:
    """Metrics whose every value is 0 or 1 (shares of sessions or events): their means lie in [0, 1]."""
    t = agg.group_by("metric").aggregate([("not01", "sum")])
    return {m for m, k in zip(t["metric"].to_pylist(), t["not01_sum"].to_pylist(), strict=True) if not k}


def per_metric(agg: pa.Table) -> pd.DataFrame:
    """Per metric (an exam's per-question metrics of an older table folded as ``<family>:*``):
    the values' count, least and greatest."""
    # Grouped in Arrow first: a pandas frame of every (arm, metric, session) row grew with the corpus.
    t = agg.select(["metric", "n", "min", "max"]).filter(pc.greater(agg.column("n"), 0))
    t = t.group_by("metric").aggregate([("n", "sum"), ("min", "min"), ("max", "max")])
    df = pd.DataFrame(
        {
            "metric": pd.Series([question_key(m) for m in t.column("metric").to_pylist()], dtype=object),
            "n": t.column("n_sum").to_numpy(),
            "min": t.column("min_min").to_numpy(zero_copy_only=False),
            "max": t.column("max_max").to_numpy(zero_copy_only=False),
        }
    )
    return df.groupby("metric", sort=True).agg(n=("n", "sum"), lo=("min", "min"), hi=("max", "max"))


def same_as_baseline(agg: pa.Table, baseline: str) -> pd.Series:
    """Per (arm, metric) of the non-baseline arms: whether every session mean equals the
    baseline's in the sessions both have (pairs with no shared session are absent)."""
    # On integer codes in numpy: pandas frames of every (arm, metric, session) row, joined, grew
    # with the corpus (and an Arrow hash join more so).
    t = agg.filter(pc.greater(agg.column("n"), 0))
    value = t.column("sum").to_numpy() / t.column("n").to_numpy().astype(np.float64)
    arms, arm = _codes(t.column("arm"))
    metrics, metric = _codes(t.column("metric"))
    _, session = _codes(t.column("session"))
    key = metric * (int(session.max(initial=-1)) + 1) + session  # one per (metric, session)
    is_base = arm == (arms.index(baseline) if baseline in arms else -1)
    base_key, base_value = key[is_base], value[is_base]
    by_key = np.argsort(base_key, kind="stable")
    base_key, base_value = base_key[by_key], base_value[by_key]
    cand = np.flatnonzero(~is_base)
    if len(base_key):
        at = np.minimum(np.searchsorted(base_key, key[cand]), len(base_key) - 1)
        shared = base_key[at] == key[cand]  # the sessions the baseline has too
        cand, at = cand[shared], at[shared]
        same = np.abs(value[cand] - base_value[at]) <= 1e-12
    else:
        cand, same = cand[:0], np.zeros(0, dtype=bool)
    pair = arm[cand] * len(metrics) + metric[cand]
    pairs = np.unique(pair)
    differ = np.unique(pair[~same])
    # An older table's per-question metrics fold into their family (``<family>:*``).
    folded = pd.DataFrame(
        {
            "arm": pd.Series([arms[p // len(metrics)] for p in pairs], dtype=object),
            "metric": pd.Series([question_key(metrics[p % len(metrics)]) for p in pairs], dtype=object),
            "same": ~np.isin(pairs, differ),
        }
    )
    return folded.groupby(["arm", "metric"])["same"].all().rename(None)


def _codes(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """A string column as its distinct values and each row's index among them."""
    enc = pc.dictionary_encode(column.combine_chunks())
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
