"""Probe scoring benchmark: the default suite over a default-sized run's events per session."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks import Figure, benchmark

ARMS = 17  # the default experiment's arm count once the candidates are merged
TARGET_EVENTS = 13_000  # ~200 sessions x 17 arms x ~4 compactions


@benchmark("probes", "score 20 synthetic sessions x 17 arms with the default suite (one process, CPU time)")
def bench_probes() -> list[Figure]:
    from evalkit.contracts.config import CorpusConfig, ModelConfig, ReplayConfig
    from evalkit.corpus import build_corpus
    from evalkit.replay import replay_corpus
    from evalkit.score import score_run
    from evalkit.score.stage import ScoreStats
    from evalkit.score.suite import find_suite

    with tempfile.TemporaryDirectory() as d:
        run = Path(d)
        build_corpus(CorpusConfig(sessions=20), 11, run / "corpus")
        replay_corpus(run / "corpus", run, ReplayConfig(), ModelConfig(model="x"))
        # The candidates live on other branches: 17 arms are the baseline's events under 17 names.
        # Kept tails are then identical across arms, the best case for the per-message caches.
        base = (run / "events" / "baseline.jsonl").read_text().splitlines()
        for i in range(1, ARMS):
            with open(run / "events" / f"arm{i:02d}.jsonl", "w", encoding="utf-8") as fh:
                for line in base:
                    ev = json.loads(line)
                    ev["arm"] = f"arm{i:02d}"
                    fh.write(json.dumps(ev) + "\n")
        suite = find_suite("probes/default.toml")
        stats = ScoreStats()
        # One process, so CPU time is measurable and independent of other load on the machine;
        # score_run's pool divides the wall time by the core count.
        t, c = time.perf_counter(), time.process_time()
        rows = score_run(run, suite=suite, stats=stats, workers=1)
        dt, cpu = time.perf_counter() - t, time.process_time() - c
    return [
        Figure("events scored", stats.events, "events"),
        Figure("metric rows", rows, "rows"),
        Figure("scoring wall time (1 process)", dt, "s"),
        Figure("scoring CPU time (1 process)", cpu, "s"),
        Figure("CPU per event", 1000 * cpu / stats.events, "ms"),
        Figure(
            f"projected {TARGET_EVENTS:,} events on {os.cpu_count() or 1} cores (CPU-bound)",
            TARGET_EVENTS * cpu / stats.events / (os.cpu_count() or 1),
            "s",
        ),
    ]
