"""Scale benchmarks.

- ``scale-<n>``: one local run (3 arms, 2 workers) at n = 50, 200 and 800 sessions of the default
  synthetic corpus: wall time, sessions per second, wall time per session, and the peak RSS of the
  driver and of its largest child (a forked worker's figure starts at the driver's). Each size is
  its own benchmark, so it runs in a fresh process and its peak-RSS figures are its own high-water
  marks: memory flat in corpus size shows as the same RSS at every size.
- ``scale-local`` / ``scale-shards`` / ``scale-ray``: the same experiment at one size (the smallest,
  50) run locally, as 3 shards on the local executor, and as 2 shards on a local Ray instance
  (2 CPUs, when Ray is installed): wall time, overhead per shard, peak RSS.

``EVALKIT_BENCH_SCALE_SESSIONS`` overrides the sizes (e.g. ``4,8`` for a quick check); the 800-session
run takes several minutes on 2 cores.
"""

from __future__ import annotations

import os
import resource
import tempfile
import time

from evalkit.bench import Figure, benchmark

ARMS = ["baseline", "aa", "head-tail"]
SIZES = (50, 200, 800)


def _sizes() -> list[int]:
    raw = os.environ.get("EVALKIT_BENCH_SCALE_SESSIONS")
    return [int(x) for x in raw.split(",") if x.strip()] if raw else list(SIZES)


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


def _measure(mode: str, run, sizes: list[int]) -> list[Figure]:
    rows: list[Figure] = []
    for n in sizes:
        exp = _experiment(n)
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            shards = run(exp, os.path.join(d, "run"))
            wall = time.perf_counter() - t
        rows += [
            Figure(f"{mode}: {n} sessions x {len(ARMS)} arms, wall", wall, "s"),
            Figure(f"{mode}: {n} sessions, throughput", n / wall, "sessions/s"),
            Figure(f"{mode}: {n} sessions, wall per session", wall / n, "s"),
        ]
        if shards:
            rows.append(Figure(f"{mode}: {n} sessions, wall per shard ({shards} shards)", wall / shards, "s"))
    # A forked worker starts with the driver's RSS high-water mark (Linux), so this figure is at
    # least the driver's RSS when the pool was forked: it bounds a worker, it does not isolate it.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows.append(Figure(f"{mode}: peak RSS of a worker process (forked: from the driver's)", peak, "MB"))
    rows.append(
        Figure(
            f"{mode}: peak RSS of the driver", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "MB"
        )
    )
    return rows


def _local(exp, d) -> int:
    from evalkit.run import run_experiment

    run_experiment(exp, d)
    return 0


def _size_bench(n: int) -> None:
    @benchmark(f"scale-{n}", f"one local run at {n} sessions (3 arms, 2 workers): throughput, peak RSS")
    def bench() -> list[Figure]:
        return _measure(f"local {n}", _local, [n])


for _n in _sizes():
    _size_bench(_n)


@benchmark("scale-local", "the comparison's local run: one process pool (3 arms, 2 workers), smallest size")
def bench_local() -> list[Figure]:
    return _measure("local", _local, _sizes()[:1])


@benchmark("scale-shards", "the same run as 3 shards on the local executor, then merged")
def bench_shards() -> list[Figure]:
    from evalkit.executor import run_with_executor

    return _measure(
        "3 shards", lambda exp, d: run_with_executor(exp, d, kind="local", shards=3) and 3, _sizes()[:1]
    )


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
        rows = _measure(
            "ray 2 shards", lambda exp, d: run_with_executor(exp, d, kind="ray", shards=2) and 2, _sizes()[:1]
        )
    finally:
        ray.shutdown()
    # Ray's workers are the raylet's children, not ours: their RSS is not in RUSAGE_CHILDREN.
    rows = [r for r in rows if "worker process" not in r.figure]
    return [Figure("ray: local instance start", start, "s"), *rows]
