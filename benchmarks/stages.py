"""Peak RSS per stage at 50 / 200 / 800 synthetic sessions (#35: every stage flat in corpus size).

``evalkit run`` runs every stage in one process, so its peak is the largest stage's. Here each
stage of one run (the scale bench's experiment: 3 arms, 2 workers) runs in a fresh process of its
own, in order, on the same run folder; the kernel's high-water marks of that process
(``RUSAGE_SELF``) and of the largest worker it reaped (``RUSAGE_CHILDREN``; a forked worker counts
the pages it shares with the stage's process) are the stage's. Derived rows give each stage's
largest/smallest-size ratio against #35's 1.2x.

``EVALKIT_BENCH_SCALE_SESSIONS`` overrides the sizes, as for the scale bench (e.g. ``8,16,32``).
"""

from __future__ import annotations

import resource
import tempfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from benchmarks import Figure, benchmark, derived
from benchmarks.scale import _experiment, _sizes

STAGES = ("corpus", "replay", "score", "continuation", "health", "decide", "report")
FLAT = 1.2  # #35: peak RSS at the largest size at most this times the smallest's


def _run_stage(stage: str, n: int, root: str) -> tuple[float, float]:
    """Run one stage in this (fresh) process; its peak RSS and its largest worker's, MB."""
    from evalkit.pipeline import run
    from evalkit.pipeline.warnings import write as write_warnings

    exp = run.prepare(_experiment(n))
    paths = run.RunPaths(Path(root))
    if stage == "corpus":
        paths.root.mkdir(parents=True, exist_ok=True)
        run.write_run_config(exp, paths, ["run"])
        run.stage_corpus(exp, paths)
    elif stage == "replay":
        run.stage_replay(exp, paths, n)
    elif stage == "score":
        run.stage_score(exp, paths)
    elif stage == "continuation":
        run.stage_continuation(exp, paths)
    elif stage == "health":
        run.stage_health(exp, paths)
    elif stage == "decide":
        run.stage_decide(exp, paths)
        write_warnings(paths.root, exp.config)
    else:
        run.stage_report(exp, paths)
    mb = 1024  # ru_maxrss is in kB on Linux
    return (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / mb,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / mb,
    )


def figure_name(stage: str, n: int, whose: str) -> str:
    return f"stage {stage}: {n} sessions, peak RSS of the {whose}"


def measure(n: int) -> list[Figure]:
    """Every stage of one run at ``n`` sessions, each in a fresh spawned process."""
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for stage in STAGES:
            with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as ex:
                own, worker = ex.submit(_run_stage, stage, n, str(Path(d) / "run")).result()
            rows.append(Figure(figure_name(stage, n, "stage process"), own, "MB"))
            if worker:
                rows.append(Figure(figure_name(stage, n, "largest worker"), worker, "MB"))
    return rows


def _size_bench(n: int) -> None:
    @benchmark(f"stages-{n}", f"peak RSS of each stage, each in its own process, at {n} sessions (3 arms)")
    def bench() -> list[Figure]:
        return measure(n)


for _n in _sizes():
    _size_bench(_n)


@derived
def flatness(rows: list[Figure]) -> list[Figure]:
    """Per stage (and its largest worker): peak RSS at the largest size ÷ at the smallest, when
    both were measured. The unit says whether #35's limit holds."""
    value = {r.figure: r.value for r in rows}
    sizes = _sizes()
    lo, hi = min(sizes), max(sizes)
    out = []
    for stage in STAGES:
        for whose in ("stage process", "largest worker"):
            a, b = value.get(figure_name(stage, lo, whose)), value.get(figure_name(stage, hi, whose))
            if a and b and hi > lo:
                ratio = b / a
                verdict = "holds" if ratio <= FLAT else "does not hold"
                out.append(
                    Figure(
                        f"stage {stage}: peak RSS of the {whose}, {hi}/{lo} sessions",
                        ratio,
                        f"x (#35: <= {FLAT}x, {verdict})",
                    )
                )
    return out
