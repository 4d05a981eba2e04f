"""The stages' worker pools: what a worker process is set up with."""

from __future__ import annotations

import gc

from evalkit.common.workers import WORKER_GC_THRESHOLD, worker_pool


def _threshold(_: int) -> tuple[int, ...]:
    return gc.get_threshold()


def test_workers_collect_cycles_at_the_workers_threshold_and_the_parent_keeps_its_own():
    before = gc.get_threshold()
    with worker_pool(2) as pool:
        seen = set(pool.map(_threshold, range(4)))
    assert seen == {(WORKER_GC_THRESHOLD, *before[1:])}
    assert gc.get_threshold() == before
    assert before[0] < WORKER_GC_THRESHOLD  # the point of the setting: fewer collections than the default
