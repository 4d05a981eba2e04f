"""Replay benchmark: the default experiment's replay (200 synthetic sessions x every arm)."""

from __future__ import annotations

import os
import resource
import tempfile
import time

from benchmarks import Figure, benchmark


@benchmark(
    "replay", "replay 200 synthetic sessions through every default arm (extractive summarizer, 2 workers)"
)
def bench_replay() -> list[Figure]:
    from evalkit.contracts.config import CorpusConfig, load_experiment
    from evalkit.corpus import build_corpus
    from evalkit.replay import replay_corpus

    exp = load_experiment()
    replay = exp.config.replay.model_copy(update={"workers": 2})
    n = int(os.environ.get("EVALKIT_BENCH_SESSIONS", "200"))
    with tempfile.TemporaryDirectory() as d:
        build_corpus(CorpusConfig(sessions=n), exp.seed, os.path.join(d, "corpus"), workers=2)
        cpu0 = _children_cpu() + time.process_time()
        t = time.perf_counter()
        counts = replay_corpus(os.path.join(d, "corpus"), d, replay, exp.config.model, n)
        wall = time.perf_counter() - t
        cpu = _children_cpu() + time.process_time() - cpu0
        size = sum(
            os.path.getsize(os.path.join(d, "events", f)) for f in os.listdir(os.path.join(d, "events"))
        )
    events = sum(counts.values())
    peak_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return [
        Figure(f"replay {n} sessions x {len(counts)} arms: wall", wall, "s"),
        Figure("replay CPU (main + workers)", cpu, "s"),
        Figure("events", events, "events"),
        Figure("events per second (wall)", events / wall, "events/s"),
        Figure("session-arms per CPU second", n * len(counts) / cpu, "session-arms/s"),
        Figure("events on disk", size / 1e6, "MB"),
        Figure("peak RSS, largest worker", peak_child, "MB"),
        Figure("peak RSS, main process", peak_self, "MB"),
    ]


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime
