"""The metrics file collapsed to session rows (evalkit.contracts.metrics_sessions.session_table): the same
numbers as grouping the whole table at once, whatever the row groups cut and in whatever order
the rows come, with the keys held as categoricals that order as their strings do."""

from __future__ import annotations

import math
import random

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.contracts.metrics import COLUMNS
from evalkit.contracts.metrics_sessions import KEYS, SESSION_COLUMNS, session_table


def _rows(seed: int) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for s in range(12):
        for a in ("baseline", "b", "a\nodd", "Z"):
            for e in range(rng.randint(1, 6)):
                for m in ("x", "turns_between", f"q:{s}:{rng.randint(0, 2)}", "all_fail"):
                    if m == "all_fail" and s % 3 == 0:
                        out.append(("run", a, f"s{s:02d}", e, e, 0, m, None, "boom"))
                        continue
                    v = rng.random() * 10
                    err = "boom" if m != "all_fail" and rng.random() < 0.1 else None
                    out.append(
                        ("run", a, f"s{s:02d}", e, e, 0, m, None if err and rng.random() < 0.5 else v, err)
                    )
    return out


def _write(path, rows: list[tuple], row_group: int) -> None:
    table = pa.table({c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)})
    pq.write_table(table, path, row_group_size=row_group)


def _expected(rows: list[tuple]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    ok = df["error"].isna() & df["value"].notna()
    df["v"] = df["value"].where(ok)
    out = []
    for (a, m, s), g in df.groupby(KEYS, sort=True):
        n = int(g["v"].notna().sum())
        total = float(g["v"].sum()) if n else math.nan
        out.append(
            {
                "arm": a,
                "metric": m,
                "session": s,
                "n": n,
                "sum": total,
                "rows": len(g),
                "errors": int(g["error"].notna().sum()),
            }
        )
    return pd.DataFrame(out)


@pytest.mark.parametrize(("row_group", "shuffle"), [(1_000_000, False), (7, False), (5, True), (1, True)])
def test_session_rows_match_grouping_the_whole_table(tmp_path, row_group, shuffle):
    rows = _rows(3)
    if shuffle:  # a key's rows spread over many, not adjacent, row groups
        random.Random(1).shuffle(rows)
    _write(tmp_path / "m.parquet", rows, row_group)
    got, events = session_table(tmp_path / "m.parquet", ("turns_between",))
    want = _expected(rows)

    assert list(got.columns) == SESSION_COLUMNS
    assert [str(got[c].dtype) for c in KEYS] == ["category"] * 3
    # sorted by the strings, as a groupby over string keys sorts
    assert list(zip(*(got[c].astype(str) for c in KEYS), strict=True)) == list(
        zip(*(want[c] for c in KEYS), strict=True)
    )
    assert got["n"].tolist() == want["n"].tolist()
    assert got["rows"].tolist() == want["rows"].tolist()
    assert got["errors"].tolist() == want["errors"].tolist()
    assert got["sum"].to_numpy() == pytest.approx(want["sum"].to_numpy(), rel=1e-12, nan_ok=True)
    assert got["value"].to_numpy() == pytest.approx((want["sum"] / want["n"]).to_numpy(), nan_ok=True)
    failed = got[got["n"] == 0]
    all_fail = failed[failed["metric"] == "all_fail"]
    assert len(all_fail) == 4 * 4  # sessions 0, 3, 6, 9 under 4 arms, and none of the others
    assert set(all_fail["session"].astype(str)) == {"s00", "s03", "s06", "s09"}
    assert failed["value"].isna().all() and failed["sum"].isna().all()
    assert failed["error"].notna().all() and got[got["n"] > 0]["error"].isna().all()
    # the median's event rows: every error-free turns_between value, once
    good = [r for r in rows if r[6] == "turns_between" and r[8] is None and r[7] is not None]
    assert sorted(events["value"]) == sorted(r[7] for r in good)


def test_the_same_rows_in_other_row_groups_give_the_same_frame(tmp_path):
    rows = _rows(5)
    _write(tmp_path / "one.parquet", rows, 1_000_000)
    _write(tmp_path / "many.parquet", rows, 3)
    a, _ = session_table(tmp_path / "one.parquet")
    b, _ = session_table(tmp_path / "many.parquet")
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)
    # the sections' filters work on the categorical keys as on strings
    assert set(a[a["metric"].str.startswith("q:")]["metric"].astype(str)) == {
        r[6] for r in rows if r[6].startswith("q:")
    }
    assert len(a[(a["arm"] == "a\nodd") & (a["metric"] == "x")]) == 12


def test_a_row_without_a_key_names_the_column_and_row(tmp_path):
    rows = _rows(2)
    rows[9] = (*rows[9][:2], None, *rows[9][3:])
    _write(tmp_path / "m.parquet", rows, 4)
    with pytest.raises(ValueError, match=r"m\.parquet: column session, row 9: None"):
        session_table(tmp_path / "m.parquet")


def test_the_session_rows_come_from_the_aggregate_read_encoded_with_only_their_columns(tmp_path, monkeypatch):
    from evalkit.contracts import aggregate

    path = tmp_path / "metrics.parquet"
    _write(path, _rows(5), 37)
    aggregate.write(tmp_path)
    whole, _ = session_table(path)
    asked = []
    load = aggregate.load

    def spy(p, columns=None, encoded=False):
        asked.append((columns, encoded))
        return load(p, columns, encoded)

    monkeypatch.setattr(aggregate, "load", spy)
    got, _ = session_table(path)
    # keys as dictionaries (no string per row), and not the columns no section reads
    assert asked and asked[0][1] and not {"sumsq", "min", "max", "not01"} & set(asked[0][0])
    pd.testing.assert_frame_equal(got, whole)
