"""Scale benchmarks.

- ``scale-<n>``: one local run (3 arms, 2 workers) at n = 50, 200 and 800 sessions of the default
  synthetic corpus: wall time, sessions per second, wall time per session, the peak RSS of the
  driver and the peak RSS of the largest worker process. Each size is its own benchmark, so it runs
  in a fresh process and its figures are its own high-water marks: memory flat in corpus size shows
  as the same RSS at every size. A forked worker's RSS counts the driver's pages it shares
  copy-on-write (all of the driver's memory at the fork), so a worker forked late from a large
  driver shows the driver's size: the bench also gives each worker's peak private memory
  (``Private_*`` of ``/proc/PID/smaps_rollup``, sampled every 0.2 s), what the worker itself adds.
- ``scale-local`` / ``scale-shards`` / ``scale-ray``: the same experiment at one size (the smallest,
  50) run locally, as 3 shards on the local executor, and as 2 shards on a local Ray instance
  (2 CPUs, when Ray is installed): wall time, wall per shard, peak RSS; once all three ran, the
  overhead per shard: (the sharded run's wall - the local run's) / shards.

``EVALKIT_BENCH_SCALE_SESSIONS`` overrides the sizes (e.g. ``4,8`` for a quick check); the 800-session
run takes several minutes on 2 cores.
"""

from __future__ import annotations

import os
import resource
import statistics
import tempfile
import threading
import time

from benchmarks import Figure, benchmark, derived

ARMS = ["baseline", "aa", "head-tail"]
SIZES = (50, 200, 800)
SHARDS = {"3 shards": 3, "ray 2 shards": 2}  # the sharded comparison runs: how many shards each


def _sizes() -> list[int]:
    raw = os.environ.get("EVALKIT_BENCH_SCALE_SESSIONS")
    return [int(x) for x in raw.split(",") if x.strip()] if raw else list(SIZES)


def _experiment(n: int):
    from evalkit.contracts.config import load_experiment

    return load_experiment(
        None,
        {
            "name": "bench-scale",
            "corpus": {"kind": "synth", "sessions": n},
            "replay": {"arms": ARMS, "workers": 2},
            "continuation": {"workers": 2},
        },
    )


def _proc_kb(pid: int, name: str, fields: tuple[str, ...]) -> int | None:
    """The sum of ``fields`` (kB) in ``/proc/PID/<name>``; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/{name}", encoding="ascii") as fh:
            return sum(int(line.split()[1]) for line in fh if line.startswith(fields))
    except (OSError, ValueError, IndexError):
        return None


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children", encoding="ascii") as fh:
                    kids = [int(k) for k in fh.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


class WorkerSampler:
    """Every ``interval`` seconds, each descendant process's peak RSS (VmHWM, exact up to its last
    sample) and private memory (sampled): what a worker holds apart from the pages it shares with
    the driver. Linux ``/proc``; elsewhere it sees no process and reports nothing."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.hwm: dict[int, int] = {}
        self.private: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-worker-sampler", daemon=True)

    def __enter__(self) -> WorkerSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        me = os.getpid()
        while True:
            for pid in _descendants(me):
                hwm = _proc_kb(pid, "status", ("VmHWM",))
                private = _proc_kb(pid, "smaps_rollup", ("Private_Clean", "Private_Dirty"))
                if hwm:
                    self.hwm[pid] = max(self.hwm.get(pid, 0), hwm)
                if private:
                    self.private[pid] = max(self.private.get(pid, 0), private)
            if self._stop.wait(self.interval):
                return


def _wall_figure(mode: str, n: int) -> str:
    return f"{mode}: {n} sessions x {len(ARMS)} arms, wall"


def _measure(mode: str, run, sizes: list[int]) -> list[Figure]:
    rows: list[Figure] = []
    for n in sizes:
        exp = _experiment(n)
        with tempfile.TemporaryDirectory() as d, WorkerSampler() as sampler:
            t = time.perf_counter()
            shards = run(exp, os.path.join(d, "run"))
            wall = time.perf_counter() - t
        rows += [
            Figure(_wall_figure(mode, n), wall, "s"),
            Figure(f"{mode}: {n} sessions, throughput", n / wall, "sessions/s"),
            Figure(f"{mode}: {n} sessions, wall per session", wall / n, "s"),
        ]
        if shards:
            rows.append(Figure(f"{mode}: {n} sessions, wall per shard ({shards} shards)", wall / shards, "s"))
        rows += [
            Figure(f"{mode}: {n} sessions, worker processes", len(sampler.hwm), "processes"),
            Figure(
                f"{mode}: {n} sessions, peak private memory per worker, largest",
                max(sampler.private.values(), default=0) / 1024,
                "MB",
            ),
            Figure(
                f"{mode}: {n} sessions, peak private memory per worker, median",
                statistics.median(sampler.private.values()) / 1024 if sampler.private else 0,
                "MB",
            ),
        ]
    # Exact, from the kernel: the largest peak among exited children (shared pages included).
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(Figure(f"{mode}: peak RSS of the driver", driver, "MB"))
    rows.append(Figure(f"{mode}: peak RSS of the largest worker (shared pages included)", worker, "MB"))
    return rows


def _local(exp, d) -> int:
    from evalkit.pipeline.run import run_experiment

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
    from evalkit.pipeline.executors import run_with_executor

    k = SHARDS["3 shards"]
    return _measure(
        "3 shards", lambda exp, d: run_with_executor(exp, d, kind="local", shards=k) and k, _sizes()[:1]
    )


@benchmark("scale-ray", "the same run as 2 shards on a local Ray instance (num_cpus=2); skipped without Ray")
def bench_ray() -> list[Figure]:
    try:
        import ray
    except ImportError:
        return [Figure("ray: not installed (pip install 'evalkit[ray]'), skipped", 0, "-")]
    from evalkit.pipeline.executors import run_with_executor

    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter() - t
    try:
        k = SHARDS["ray 2 shards"]
        rows = _measure(
            "ray 2 shards", lambda exp, d: run_with_executor(exp, d, kind="ray", shards=k) and k, _sizes()[:1]
        )
    finally:
        ray.shutdown()
    # Ray's workers are not reaped by us (RUSAGE_CHILDREN), and the sampler would count Ray's own
    # daemons (GCS, raylet) among our descendants: no worker figures for this mode.
    rows = [r for r in rows if "worker" not in r.figure]
    return [Figure("ray: local instance start", start, "s"), *rows]


@derived
def overhead_per_shard(rows: list[Figure]) -> list[Figure]:
    """Per sharded run at the comparison's size: what it took beyond the local run, per shard
    (negative when the sharded run was faster). Nothing for a run that is not among ``rows``."""
    value = {r.figure: r.value for r in rows}
    n = _sizes()[0]
    local = value.get(_wall_figure("local", n))
    out = []
    for mode, k in SHARDS.items():
        sharded = value.get(_wall_figure(mode, n))
        if local is not None and sharded is not None:
            out.append(
                Figure(f"{mode}: {n} sessions, overhead per shard vs local", (sharded - local) / k, "s")
            )
    return out
