"""Scale benchmark: the same small experiment run locally, as 3 shards on the local executor, and
as shards on a local Ray instance (2 CPUs, when Ray is installed): wall time, sessions per second,
overhead per shard, and the peak RSS of a worker process.

Sizes come from ``EVALKIT_BENCH_SCALE_SESSIONS`` (default ``4,8``: the issue's 50/200/800 take
tens of minutes on a shared 2-core machine; set it on a free one). Each mode is its own benchmark,
so each runs in a fresh process and its peak-RSS figure is its own workers' high-water mark.
"""

from __future__ import annotations

import os
import resource
import tempfile
import time

from evalkit.bench import Figure, benchmark

ARMS = ["baseline", "aa", "head-tail"]


def _sizes() -> list[int]:
    return [int(x) for x in os.environ.get("EVALKIT_BENCH_SCALE_SESSIONS", "4,8").split(",") if x.strip()]


def _experiment(n: int):
    from evalkit.config import load_experiment

    return load_experiment(
        None,
        {
            "name": "bench-scale",
            "corpus": {"kind": "synth", "sessions": n},
            "replay": {"arms": ARMS, "workers": 2},
            "continuation": {"workers": 2},
        },
    )


def _measure(mode: str, run) -> list[Figure]:
    rows: list[Figure] = []
    for n in _sizes():
        exp = _experiment(n)
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            shards = run(exp, os.path.join(d, "run"))
            wall = time.perf_counter() - t
        rows += [
            Figure(f"{mode}: {n} sessions x {len(ARMS)} arms, wall", wall, "s"),
            Figure(f"{mode}: {n} sessions, throughput", n / wall, "sessions/s"),
        ]
        if shards:
            rows.append(Figure(f"{mode}: {n} sessions, wall per shard ({shards} shards)", wall / shards, "s"))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows.append(Figure(f"{mode}: peak RSS of a worker process (largest size)", peak, "MB"))
    rows.append(
        Figure(
            f"{mode}: peak RSS of the driver", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "MB"
        )
    )
    return rows


@benchmark("scale-local", "one run in one process pool (3 arms, 2 workers), at a few corpus sizes")
def bench_local() -> list[Figure]:
    from evalkit.run import run_experiment

    return _measure("local", lambda exp, d: run_experiment(exp, d) and 0)


@benchmark("scale-shards", "the same run as 3 shards on the local executor, then merged")
def bench_shards() -> list[Figure]:
    from evalkit.executor import run_with_executor

    return _measure("3 shards", lambda exp, d: run_with_executor(exp, d, kind="local", shards=3) and 3)


@benchmark("scale-ray", "the same run as 2 shards on a local Ray instance (num_cpus=2); skipped without Ray")
def bench_ray() -> list[Figure]:
    try:
        import ray
    except ImportError:
        return [Figure("ray: not installed (pip install 'evalkit[ray]'), skipped", 0, "-")]
    from evalkit.executor import run_with_executor

    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter() - t
    try:
        rows = _measure("ray 2 shards", lambda exp, d: run_with_executor(exp, d, kind="ray", shards=2) and 2)
    finally:
        ray.shutdown()
    # Ray's workers are the raylet's children, not ours: their RSS is not in RUSAGE_CHILDREN.
    rows = [r for r in rows if "worker process" not in r.figure]
    return [Figure("ray: local instance start", start, "s"), *rows]
