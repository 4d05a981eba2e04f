"""The stages' worker pools: what a worker process is set up with, and by whom (the library sets
nothing process-wide; the ``evalkit`` command registers its collector setting)."""

from __future__ import annotations

import gc
import threading
import time

from evalkit.cli.memory import WORKER_GC_THRESHOLD, collect_less_often
from evalkit.common import workers
from evalkit.common.workers import on_worker_start, stop_workers, worker_pool


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


def test_ending_workers_under_cancelled_jobs_raises_nothing_in_the_pools_thread(monkeypatch):
    """Ctrl-C in ``calibrate --simulate``: ``Executor.map`` cancels its queued jobs as the interrupt
    leaves it, then :func:`stop_workers` ends the workers. Ended in the other order, the pool's
    manager thread raised InvalidStateError (Python < 3.12) about one time in twenty, a traceback
    after the user's one-line exit. The race is the scheduler's, so it is run many times."""
    errors: list = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    for _ in range(40):
        pool = worker_pool(2)
        jobs = [pool.submit(time.sleep, 0.02) for _ in range(20)]
        jobs[0].result()
        for job in jobs:
            job.cancel()
        manager = pool._executor_manager_thread  # the thread that raised it
        stop_workers(pool)
        manager.join(10)
        assert not manager.is_alive()
        assert all(job.done() for job in jobs)
    assert [e.exc_type.__name__ for e in errors] == []
