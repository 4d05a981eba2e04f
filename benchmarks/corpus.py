"""Corpus benchmarks: synthetic generation + facts, and streaming reads."""

from __future__ import annotations

import os
import resource
import tempfile
import time

from benchmarks import Figure, benchmark


@benchmark("corpus", "synthesize 40 sessions with facts on all cores, then stream them back")
def bench_corpus() -> list[Figure]:
    from evalkit.contracts.config import CorpusConfig
    from evalkit.corpus import build_corpus, read_sessions

    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        m = build_corpus(CorpusConfig(sessions=40), 7, d)
        gen = time.perf_counter() - t
        size = os.path.getsize(os.path.join(d, "sessions.jsonl"))
        t = time.perf_counter()
        n = sum(1 for _ in read_sessions(d))
        read = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return [
        Figure("synth+facts sessions/s", m["stats"]["sessions"] / gen, "sessions/s"),
        Figure("corpus read throughput", size / read / 1e6, "MB/s"),
        Figure("corpus read sessions/s", n / read, "sessions/s"),
        Figure("peak RSS (main process)", peak, "MB"),
    ]
