"""Importer benchmark: throughput and peak memory importing the real transcripts folder."""

from __future__ import annotations

import os
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchmarks import Figure, benchmark

_ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = next(
    (p / "shared" / "transcripts" for p in _ROOT.parents if (p / "shared" / "transcripts").is_dir()),
    _ROOT.parent / "shared" / "transcripts",
)


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _traced(fn):
    """(result, peak Python heap in MB) of ``fn()`` under tracemalloc (which slows it; not timed)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


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
        t = time.perf_counter()
        _, report = import_to_corpus([src], d)
        full = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        _, peak = _traced(lambda: import_to_corpus([src], d))
    big_mb, big_peak, big_rate = _large_claude_folder(src / "claude-code")
    return [
        Figure("input size", mb, "MB"),
        Figure("sessions imported", n, "sessions"),
        Figure("import (parse only) throughput", mb / parse, "MB/s"),
        Figure("import + facts + write corpus throughput", mb / full, "MB/s"),
        Figure("peak Python heap, import+write (tracemalloc)", peak, "MB"),
        Figure("problems counted", sum(report.problems.values()), "records"),
        Figure("large Claude Code folder (real files repeated)", big_mb, "MB"),
        Figure("large folder: import + facts + write throughput", big_rate, "MB/s"),
        Figure("large folder: peak Python heap (tracemalloc)", big_peak, "MB"),
    ]


def _large_claude_folder(src: Path, target_mb: float = 100.0) -> tuple[float, float, float]:
    """Copies of the real Claude Code files up to ``target_mb``: flat memory means the peak stays
    near the largest single session, not the folder size."""
    from evalkit.importers import import_to_corpus

    files = sorted(src.rglob("*.jsonl"))
    if not files:
        return 0.0, float("nan"), float("nan")
    with tempfile.TemporaryDirectory() as d:
        folder, size, k = Path(d) / "projects", 0, 0
        folder.mkdir()
        while size < target_mb * 1e6:
            f = files[k % len(files)]
            dst = folder / f"copy{k // len(files):03d}" / f.name
            dst.parent.mkdir(exist_ok=True)
            dst.write_bytes(f.read_bytes())
            size += dst.stat().st_size
            k += 1
        t = time.perf_counter()
        import_to_corpus([folder], Path(d) / "out")
        rate = size / 1e6 / (time.perf_counter() - t)
        _, peak = _traced(lambda: import_to_corpus([folder], Path(d) / "out2"))
    return size / 1e6, peak, rate
