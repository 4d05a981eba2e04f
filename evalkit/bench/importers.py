"""Importer benchmark: throughput and peak memory importing the real transcripts folder."""

from __future__ import annotations

import os
import tempfile
import time
import tracemalloc
from pathlib import Path

from evalkit.bench import Figure, benchmark

_ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = next(
    (p / "shared" / "transcripts" for p in _ROOT.parents if (p / "shared" / "transcripts").is_dir()),
    _ROOT.parent / "shared" / "transcripts",
)


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


@benchmark("importers", "import ../shared/transcripts (auto-detected) into a corpus: MB/s and peak memory")
def bench_importers() -> list[Figure]:
    from evalkit.importers import import_to_corpus, iter_sessions

    src = Path(os.environ.get("EVALKIT_TRANSCRIPTS", TRANSCRIPTS))
    if not src.is_dir():
        print(f"[bench] importers: {src} not present, skipped")
        return []
    mb = _size(src) / 1e6
    t = time.perf_counter()
    n = sum(1 for _ in iter_sessions([src]))
    parse = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        tracemalloc.start()
        t = time.perf_counter()
        _, report = import_to_corpus([src], d)
        full = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return [
        Figure("input size", mb, "MB"),
        Figure("sessions imported", n, "sessions"),
        Figure("import (parse only) throughput", mb / parse, "MB/s"),
        Figure("import + facts + write corpus throughput", mb / full, "MB/s"),
        Figure("peak Python heap during import+write", peak / 1e6, "MB"),
        Figure("problems counted", sum(report.problems.values()), "records"),
    ]
