"""The scale bench's overhead per shard: the sharded run's wall beyond the local run's, per shard,
found among the rows the benchmarks themselves write."""

from __future__ import annotations

import time

from benchmarks import DERIVED
from benchmarks.scale import _measure, overhead_per_shard


def _waiting(seconds: float, shards: int):
    def run(exp, d) -> int:
        time.sleep(seconds)
        return shards

    return run


def test_overhead_per_shard_compares_each_sharded_run_with_the_local_one(monkeypatch):
    monkeypatch.setenv("EVALKIT_BENCH_SCALE_SESSIONS", "4,8")  # the comparison's size: the smallest
    rows = (
        _measure("local", _waiting(0.0, 0), [4])
        + _measure("3 shards", _waiting(0.6, 3), [4])
        + _measure("ray 2 shards", _waiting(0.4, 2), [4])
        + _measure("local 8", _waiting(0.01, 0), [8])  # another size: no sharded run to compare
    )
    wall = {r.figure.split(":")[0]: r.value for r in rows if r.figure.endswith("arms, wall")}
    got = {r.figure: r.value for r in overhead_per_shard(rows)}
    assert got == {
        "3 shards: 4 sessions, overhead per shard vs local": (wall["3 shards"] - wall["local"]) / 3,
        "ray 2 shards: 4 sessions, overhead per shard vs local": (wall["ray 2 shards"] - wall["local"]) / 2,
    }
    assert 0.1 < got["3 shards: 4 sessions, overhead per shard vs local"] < 1.0
    assert overhead_per_shard in DERIVED


def test_no_overhead_without_the_local_run(monkeypatch):
    monkeypatch.setenv("EVALKIT_BENCH_SCALE_SESSIONS", "4")
    assert overhead_per_shard(_measure("3 shards", _waiting(0.0, 3), [4])) == []
