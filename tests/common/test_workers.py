"""The stages' worker pools: what a worker process is set up with, and by whom (the library sets
nothing process-wide; the ``evalkit`` command registers its collector setting)."""

from __future__ import annotations

import gc

from evalkit.cli.memory import WORKER_GC_THRESHOLD, collect_less_often
from evalkit.common import workers
from evalkit.common.workers import on_worker_start, worker_pool


def _threshold(_: int) -> tuple[int, ...]:
    return gc.get_threshold()


def test_a_library_process_gets_workers_with_pythons_collector_settings(monkeypatch):
    monkeypatch.setattr(workers, "_WORKER_SETUP", [])
    before = gc.get_threshold()
    with worker_pool(2) as pool:
        seen = set(pool.map(_threshold, range(4)))
    assert seen == {before}


def test_the_commands_workers_collect_cycles_less_often_and_the_parent_keeps_its_own(monkeypatch):
    monkeypatch.setattr(workers, "_WORKER_SETUP", [])
    on_worker_start(collect_less_often)
    before = gc.get_threshold()
    with worker_pool(2) as pool:
        seen = set(pool.map(_threshold, range(4)))
    assert seen == {(WORKER_GC_THRESHOLD, *before[1:])}
    assert gc.get_threshold() == before
    assert before[0] < WORKER_GC_THRESHOLD  # the point of the setting: fewer collections than the default
