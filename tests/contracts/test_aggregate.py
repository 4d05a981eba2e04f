"""The run's one aggregate (evalkit.contracts.aggregate): per (arm, metric, session) counts, sums
and sums of squares that merge across parts of the rows as they add up over the whole."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.contracts import aggregate
from evalkit.contracts.metrics import COLUMNS


def _rows(seed: int, sessions: int = 10) -> pd.DataFrame:
    rng = random.Random(seed)
    out = []
    for s in range(sessions):
        for arm in ("baseline", "b", "a\nodd"):
            for e in range(rng.randint(1, 5)):
                for m in ("x", "share", "all_fail"):
                    if m == "all_fail" and s % 3 == 0:
                        out.append(("run", arm, f"s{s:02d}", e, e, 0, m, math.nan, "boom"))
                        continue
                    v = float(rng.random() < 0.5) if m == "share" else rng.random() * 10
                    if rng.random() < 0.1:
                        out.append(("run", arm, f"s{s:02d}", e, e, 0, m, math.nan, "boom"))
                    elif rng.random() < 0.03:
                        out.append(("run", arm, f"s{s:02d}", e, e, 0, m, math.inf, None))  # not a value
                    else:
                        out.append(("run", arm, f"s{s:02d}", e, e, 0, m, v, None))
    return pd.DataFrame(out, columns=COLUMNS)


def _expected(df: pd.DataFrame) -> pd.DataFrame:
    ok = df["error"].isna() & np.isfinite(df["value"])
    v = df["value"].where(ok)
    g = df.assign(v=v, v2=v * v, bad=(~ok).astype(int)).groupby(aggregate.KEYS, sort=True)
    return pd.DataFrame(
        {
            "rows": g.size(),
            "errors": g["bad"].sum(),
            "n": g["v"].count(),
            "sum": g["v"].sum(),
            "sumsq": g["v2"].sum(),
            "min": g["v"].min(),
            "max": g["v"].max(),
        }
    ).reset_index()


def test_the_aggregate_holds_each_sessions_counts_sums_and_squares():
    df = _rows(3)
    got = aggregate.of_frame(df).to_pandas()
    want = _expected(df)
    assert got[aggregate.KEYS].values.tolist() == want[aggregate.KEYS].values.tolist()
    for c in ("rows", "errors", "n"):
        assert got[c].tolist() == want[c].tolist(), c
    for c in ("sum", "sumsq", "min", "max"):
        assert got[c].to_numpy() == pytest.approx(want[c].to_numpy(), rel=1e-12, nan_ok=True), c
    # an error or ±inf is an error, never a zero: all_fail's failed sessions have no value at all
    failed = got[(got["metric"] == "all_fail") & (got["session"] == "s00")]
    assert (failed["n"] == 0).all() and (failed["errors"] == failed["rows"]).all()
    assert aggregate.zero_one(aggregate.of_frame(df)) == {"share"}


def assert_same_aggregate(a: pa.Table, b: pa.Table) -> None:
    """Keys and counts exactly, sums to float rounding (they were added in another order)."""
    a, b = a.to_pandas(), b.to_pandas()
    assert a[aggregate.KEYS].equals(b[aggregate.KEYS])
    for c in ("rows", "errors", "n", "not01"):
        assert a[c].tolist() == b[c].tolist(), c
    for c in ("sum", "sumsq", "min", "max"):
        assert a[c].to_numpy() == pytest.approx(b[c].to_numpy(), rel=1e-12, nan_ok=True), c


@pytest.mark.parametrize("cut", [1, 7, 50])
def test_merging_the_aggregates_of_parts_gives_the_aggregate_of_the_whole(cut):
    df = _rows(5).sample(frac=1.0, random_state=cut).reset_index(drop=True)  # a key's rows in many parts
    parts = [aggregate.of_frame(df.iloc[i : i + cut]) for i in range(0, len(df), cut)]
    assert_same_aggregate(aggregate.merge(*parts), aggregate.of_frame(df))


def test_a_file_is_aggregated_a_row_group_at_a_time_and_a_stale_aggregate_is_rebuilt(tmp_path):
    df = _rows(7)
    pq.write_table(
        pa.Table.from_pandas(df, preserve_index=False), tmp_path / "metrics.parquet", row_group_size=9
    )
    built = aggregate.build(tmp_path / "metrics.parquet")
    assert_same_aggregate(built, aggregate.of_frame(df))
    aggregate.write(tmp_path)
    assert aggregate.load(tmp_path).equals(built)
    # one value changed in place (same rows, same shape): the aggregate is rebuilt, not read stale
    changed = df.copy()
    changed.loc[changed["error"].isna() & (changed["metric"] == "x"), "value"] = 1e6
    pq.write_table(
        pa.Table.from_pandas(changed, preserve_index=False), tmp_path / "metrics.parquet", row_group_size=9
    )
    assert max(aggregate.load(tmp_path).column("max").to_pylist(), key=lambda v: v or 0) == 1e6
    # the table rewritten with fewer rows (a re-score): the old aggregate no longer describes it
    fewer = df[df["arm"] != "b"]
    pq.write_table(pa.Table.from_pandas(fewer, preserve_index=False), tmp_path / "metrics.parquet")
    assert "b" not in set(aggregate.load(tmp_path).column("arm").to_pylist())


def test_the_summary_is_the_mean_of_session_means_with_rows_and_errors():
    df = _rows(11)
    got = {(d["arm"], d["metric"]): d for d in aggregate.summary(aggregate.of_frame(df))}
    ok = df[df["error"].isna() & np.isfinite(df["value"])]
    means = (
        ok.groupby(["arm", "metric", "session"])["value"].mean().groupby(level=[0, 1]).agg(["mean", "count"])
    )
    for (arm, metric), r in means.iterrows():
        d = got[(arm, metric)]
        assert d["mean"] == pytest.approx(r["mean"], rel=1e-12) and d["sessions"] == r["count"]
        rows = df[(df["arm"] == arm) & (df["metric"] == metric)]
        assert d["values"] == len(rows)
        assert d["errors"] == int((rows["error"].notna() | ~np.isfinite(rows["value"])).sum())


def test_a_sorted_file_is_aggregated_without_merging_what_was_read_before(tmp_path, monkeypatch):
    # A metrics file in canonical order: only the last session of each row group is carried on, so
    # no merge ever sees more than about one row group's keys, however long the file (the build
    # used to merge everything read so far again and again: a table growing with the corpus).
    df = _rows(13, sessions=60).sort_values(["arm", "session", "event"], kind="stable")
    path = tmp_path / "metrics.parquet"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=20)
    groups = pq.ParquetFile(path).num_row_groups
    pf = pq.ParquetFile(path)
    whole = aggregate.merge(*(aggregate.of_rows(pf.read_row_group(i)) for i in range(groups)))
    seen: list[int] = []
    merge = aggregate.merge

    def counting(*parts):
        seen.append(sum(p.num_rows for p in parts))
        return merge(*parts)

    sort = aggregate._sorted
    sorted_rows: list[int] = []

    def sorting(t):
        sorted_rows.append(t.num_rows)
        return sort(t)

    encode = aggregate._encoded
    waiting: list[int] = []

    def encoding(t):
        waiting.append(t.num_rows)
        return encode(t)

    monkeypatch.setattr(aggregate, "merge", counting)
    monkeypatch.setattr(aggregate, "_sorted", sorting)
    monkeypatch.setattr(aggregate, "_encoded", encoding)
    built = aggregate.build(path)
    assert groups > 30 and seen
    assert max(seen) <= 2 * 20  # a row group's keys and the carried session's, never the file's
    assert built.num_rows > 10 * max(seen)
    # each arm is sorted once the file is past it: the aggregate is never sorted whole
    per_arm = built.group_by("arm").aggregate([("n", "count")]).column("n_count").to_pylist()
    assert max(sorted_rows) == max(per_arm) < built.num_rows
    # the arms finished before the last wait with their names encoded, one arm at a time
    arms = built.column("arm").to_pylist()
    assert waiting == [arms.count(a) for a in dict.fromkeys(arms)][:-1]
    assert built.equals(whole)  # the same sums to the last bit as merging every group's at once


def test_a_reader_takes_only_its_columns_with_each_key_held_once(tmp_path, monkeypatch):
    df = _rows(17, sessions=30)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "metrics.parquet")
    whole = aggregate.write(tmp_path)
    cols = ["arm", "metric", "session", "n", "sum", "min", "max"]

    def no_rebuild(*_):
        raise AssertionError("a fresh aggregate.parquet was rebuilt from the metrics table")

    monkeypatch.setattr(aggregate, "build", no_rebuild)
    t = aggregate.load(tmp_path, cols, encoded=True)
    assert t.column_names == cols
    for c in aggregate.KEYS:  # each distinct name held once, not a string per row
        assert pa.types.is_dictionary(t.schema.field(c).type)
        assert len(t.column(c).chunk(0).dictionary) == len(set(df[c]))
    assert t.cast(whole.select(cols).schema).equals(whole.select(cols))
    assert aggregate.per_metric(t).equals(aggregate.per_metric(whole))
    assert aggregate.same_as_baseline(t, "baseline").equals(aggregate.same_as_baseline(whole, "baseline"))
