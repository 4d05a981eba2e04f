"""How fast this machine is right now, so that timings from different days can be compared.

The shared 2-core machine the project is measured on has run the same code 2-4x slower on some
days than on others (a 20-million-iteration Python loop took 0.85 s of CPU on one day and
3.6 s on another), which moves every wall time in ``make bench`` and ``make eval`` with it. The
figures here are fixed workloads: read them beside a timing before comparing it with an older one.
"""

from __future__ import annotations

import os
import time

from benchmarks import Figure, benchmark

LOOP_ITERATIONS = 20_000_000


def _python_loop() -> float:
    """CPU seconds of a pure-Python loop of :data:`LOOP_ITERATIONS` additions."""
    cpu = time.process_time()
    total = 0
    for i in range(LOOP_ITERATIONS):
        total += i
    assert total == LOOP_ITERATIONS * (LOOP_ITERATIONS - 1) // 2
    return time.process_time() - cpu


def _numpy_sort() -> float:
    """CPU seconds to sort 10 million random float64 values with numpy (compiled code, one core)."""
    import numpy as np

    values = np.random.default_rng(0).random(10_000_000)
    cpu = time.process_time()
    np.sort(values)
    return time.process_time() - cpu


@benchmark(
    "machine", "this machine's speed now: fixed Python and numpy workloads (compare timings across days)"
)
def bench_machine() -> list[Figure]:
    load = os.getloadavg()[0]
    wall = time.perf_counter()
    loop = _python_loop()
    wall = time.perf_counter() - wall
    return [
        Figure("load average (1 min) at the start", load, f"on {os.cpu_count()} cores"),
        Figure(f"Python loop, {LOOP_ITERATIONS:,} additions, CPU", loop, "s"),
        Figure("  its wall time (above the CPU: the core was shared)", wall, "s"),
        Figure("numpy sort of 10M float64, CPU", _numpy_sort(), "s"),
    ]
