"""Continuation benchmark: the heuristic agent over a default-sized run (200 sessions × 17 arms).

Only the baseline arm exists on every branch, so the run's baseline events are copied under 17
arm names: the same number and size of events the full default experiment produces, read and
continued independently per arm. ``EVALKIT_BENCH_CONT_SESSIONS`` shrinks the corpus for a quick look.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time

from benchmarks import Figure, benchmark

ARMS = 17


def _cpu() -> float:
    """User + system CPU seconds of this process and its finished children (the pool's workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@benchmark("continuation", "heuristic continuations from every event of 200 sessions × 17 arms")
def bench_continuation() -> list[Figure]:
    from evalkit.continuation import run_continuation
    from evalkit.contracts.config import ContinuationConfig, CorpusConfig, ModelConfig, ReplayConfig
    from evalkit.corpus import build_corpus
    from evalkit.replay import replay_corpus

    sessions = int(os.environ.get("EVALKIT_BENCH_CONT_SESSIONS", "200"))
    with tempfile.TemporaryDirectory() as d:
        build_corpus(CorpusConfig(sessions=sessions), 20261130, os.path.join(d, "corpus"))
        replay_corpus(
            os.path.join(d, "corpus"), d, ReplayConfig(), ModelConfig(), sessions
        )
        arms = ["baseline"] + [f"copy{k:02d}" for k in range(1, ARMS)]
        for a in arms[1:]:
            shutil.copy(os.path.join(d, "events", "baseline.jsonl"), os.path.join(d, "events", f"{a}.jsonl"))
        cpu0 = _cpu()
        t = time.perf_counter()
        m = run_continuation(d, arms, ContinuationConfig(), ModelConfig(), "bench")
        wall = time.perf_counter() - t
        cpu = _cpu() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    c = m["counts"]
    return [
        Figure(f"continuation wall time ({sessions} sessions x {ARMS} arms)", wall, "s"),
        Figure("CPU time, this process + workers (load-independent)", cpu, "s"),
        Figure("continuations", c["continuations"], "events"),
        Figure("agent calls answered by the environment", c["calls"], "calls"),
        Figure("continuations per second", c["continuations"] / wall, "events/s"),
        Figure("peak RSS (main process)", peak, "MB"),
    ]
