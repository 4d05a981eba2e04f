"""Report benchmark: writing the report (events read, figures drawn) of a run folder."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import Figure, benchmark


@benchmark("report", "write the report of the default run (or of a fresh 40-session run when none exists)")
def bench_report() -> list[Figure]:
    from evalkit.contracts.config import load_experiment
    from evalkit.pipeline.run import default_run_dir, run_experiment
    from evalkit.report import write_report

    exp = load_experiment()
    with tempfile.TemporaryDirectory() as d:
        run = default_run_dir(exp)
        if not (run / "decision.json").exists():
            small = load_experiment(None, {"corpus": {"sessions": 40}})
            run = run_experiment(small, Path(d) / "run", ["run", "--sessions", "40"]).root
        events_mb = sum(p.stat().st_size for p in (run / "events").glob("*.jsonl")) / 1e6
        t = time.perf_counter()
        write_report(run, Path(d) / "report")
        took = time.perf_counter() - t
    return [
        Figure("report wall time", took, "s"),
        Figure("events read", events_mb, "MB"),
        Figure("report throughput", events_mb / took, "MB events/s"),
    ]
