"""The metrics file written from sorted streams (evalkit.contracts.metrics_stream): the same rows in the
same order as sorting the whole table, whatever the streams' cut points, in the same bytes."""

from __future__ import annotations

import random

import pyarrow.parquet as pq
import pytest

from evalkit.contracts import metrics_stream as ms
from evalkit.contracts.metrics import COLUMNS, rows_to_arrow
from evalkit.contracts.metrics_stream import replace_rows


def _rows(seed: int, sessions: int, arms=("baseline", "b", "a\nodd"), metrics=("x", "y", "z")) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for s in range(sessions):
        for a in arms:
            for e in range(rng.randint(0, 4)):
                for m in metrics:
                    v = float("nan") if rng.random() < 0.05 else rng.random()
                    err = "boom" if v != v else None
                    out.append(("run", a, f"s{s:03d}", e - 1, e, 0, m, v, err))
    return out


def _by_session(rows: list[tuple]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for r in rows:
        out.setdefault(r[2], []).append(r)
    return out


def _sorted_rows(rows: list[tuple]) -> list[tuple]:
    # ORDER = arm, session, event, replicate, metric (a stable sort: ties keep their order)
    return sorted(rows, key=lambda r: (r[1], r[2], r[3], r[5], r[6]))


def _read(path) -> list[tuple]:
    t = pq.read_table(path)
    return [tuple(d.values()) for d in t.to_pylist()]


def _same(a: list[tuple], b: list[tuple]) -> bool:
    def norm(r):
        return tuple(None if isinstance(x, float) and x != x else x for x in r)  # NaN is written as null

    return [norm(r) for r in a] == [norm(r) for r in b]


@pytest.fixture(autouse=True)
def small_groups(monkeypatch):
    monkeypatch.setattr(ms, "ROW_GROUP_ROWS", 50)  # several row groups from a small table


def test_spill_in_session_order_writes_the_fully_sorted_table(tmp_path):
    rows = _rows(1, 40)
    spill = ms.ArmSpill(tmp_path / "spill")
    for _, part in sorted(_by_session(rows).items()):
        random.Random(2).shuffle(part)  # a worker's rows in any order
        spill.add(rows_to_arrow(part))
    n = ms.write_sorted(tmp_path / "m.parquet", [spill.tables()])
    assert n == len(rows) == spill.num_rows
    assert _same(_read(tmp_path / "m.parquet"), _sorted_rows(rows))
    assert pq.ParquetFile(tmp_path / "m.parquet").num_row_groups == -(-len(rows) // 50)
    spill.remove()
    assert not (tmp_path / "spill").exists()


def test_sessions_out_of_order_are_still_sorted(tmp_path):
    rows = _rows(3, 12)
    spill = ms.ArmSpill(tmp_path / "spill")
    for _, part in sorted(_by_session(rows).items(), reverse=True):
        spill.add(rows_to_arrow(part))
    ms.write_sorted(tmp_path / "m.parquet", [spill.tables()])
    assert _same(_read(tmp_path / "m.parquet"), _sorted_rows(rows))


def test_the_bytes_depend_on_the_rows_not_on_how_they_were_split(tmp_path):
    rows = _rows(4, 30)
    whole = tmp_path / "whole.parquet"
    ms.write_sorted(whole, [[ms.sort_rows(rows_to_arrow(rows))]])
    # Three "shards" of sessions, each its own file, merged a row group at a time.
    shards = []
    for k in range(3):
        part = [r for r in rows if int(r[2][1:]) % 3 == k]
        p = tmp_path / f"shard{k}.parquet"
        ms.write_sorted(p, [[ms.sort_rows(rows_to_arrow(part))]])
        shards.append(p)
    merged = tmp_path / "merged.parquet"
    ms.write_sorted(merged, [ms.file_tables(p) for p in shards])
    assert merged.read_bytes() == whole.read_bytes()


def test_replace_rows_keeps_the_other_stages_rows(tmp_path):
    path = tmp_path / "m.parquet"
    probe = _rows(5, 20, metrics=("x", "y"))
    cont = _rows(6, 20, metrics=("refail",))
    replace_rows(path, rows_to_arrow(probe), lambda m: m != "refail")
    assert replace_rows(path, rows_to_arrow(cont), lambda m: m == "refail") == len(probe) + len(cont)
    assert _same(_read(path), _sorted_rows(probe + cont))
    # Re-scoring replaces the probe rows and leaves the continuation rows.
    probe2 = _rows(7, 20, metrics=("x",))
    spill = ms.ArmSpill(tmp_path / "spill")
    for _, part in sorted(_by_session(probe2).items()):
        spill.add(rows_to_arrow(part))
    replace_rows(path, spill.tables(), lambda m: m != "refail")
    assert _same(_read(path), _sorted_rows(probe2 + cont))


def test_an_empty_table_writes_its_schema(tmp_path):
    assert ms.write_sorted(tmp_path / "m.parquet", [[]]) == 0
    t = pq.read_table(tmp_path / "m.parquet")
    assert t.num_rows == 0 and t.schema.names == COLUMNS


def test_session_chunks_hold_whole_sessions_and_at_most_the_rows_asked(tmp_path):
    rows = _rows(8, 60)
    path = tmp_path / "m.parquet"
    ms.write_sorted(path, [[ms.sort_rows(rows_to_arrow(rows))]])
    per_session = {s: len(r) for s, r in _by_session(rows).items()}
    chunks = [t.to_pylist() for t in ms.session_chunks(path, rows=60)]
    assert len(chunks) > 3
    seen: list[str] = []
    for c in chunks:
        ids = sorted({r["session"] for r in c})
        assert len(c) <= 60 or len(ids) == 1
        assert len(c) == sum(per_session[s] for s in ids)  # every arm's rows of each of its sessions
        seen += ids
    assert seen == sorted(per_session)  # each session in exactly one chunk, in id order
    assert ms.file_sessions(path) == dict(sorted(per_session.items()))
