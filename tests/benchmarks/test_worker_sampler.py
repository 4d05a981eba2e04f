"""The scale bench's worker sampler sees each worker's own memory apart from the driver's: a forked
worker's RSS counts the driver's pages it shares, its private memory does not."""

from __future__ import annotations

import sys
import time

import pytest

from benchmarks.scale import WorkerSampler
from evalkit.common.workers import worker_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _hold(mb: int) -> int:
    block = bytearray(mb * 2**20)
    block[::4096] = b"\1" * len(block[::4096])  # touch every page
    time.sleep(1.0)  # several sampling intervals
    return len(block)


def test_sampler_sees_worker_private_memory_not_the_drivers():
    ballast = bytearray(200 * 2**20)
    ballast[::4096] = b"\1" * len(ballast[::4096])  # the driver's pages, shared with its forks
    with WorkerSampler(interval=0.05) as sampler, worker_pool(2) as pool:
        assert list(pool.map(_hold, [120, 10])) == [120 * 2**20, 10 * 2**20]
    assert len(ballast) and 1 <= len(sampler.hwm) <= 2
    private = sorted(v / 1024 for v in sampler.private.values())
    hwm = sorted(v / 1024 for v in sampler.hwm.values())
    assert private[-1] >= 110, private  # the worker that held 120 MB
    assert len(private) == 1 or private[0] < 60, private  # the other held 10 MB, not the driver's 200
    assert hwm[0] >= 200, hwm  # RSS counts the driver's 200 MB the workers map
