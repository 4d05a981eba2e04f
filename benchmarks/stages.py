"""Peak RSS per stage at 50 / 200 / 800 synthetic sessions (#35: every stage flat in corpus size).

``evalkit run`` runs every stage in one process, so its peak is the largest stage's. Here each
stage of one run runs in a fresh process of its own, in order, on the same run folder; the
kernel's high-water marks of that process (``RUSAGE_SELF``) and of the largest worker it reaped
(``RUSAGE_CHILDREN``; a forked worker counts the pages it shares with the stage's process) are the
stage's, with the CPU seconds of both. Derived rows give each stage's largest/smallest-size ratio
against #35's 1.2x.

The experiment (:data:`EXPERIMENT`) is made cheap per session so that 800 sessions stay affordable
on two cores, while every stage, probe and table still runs: the synthetic sessions stop near
:data:`SESSION_TOKENS` tokens and the window is small enough that each still compacts a few times;
3 offline arms (baseline, aa, head-tail), the default probe suite (its exams write the question
table), the continuation stage and the report. What grows with sessions is the number of
sessions, events and rows, which is what a stage must not hold all of.

``EVALKIT_BENCH_SCALE_SESSIONS`` overrides the sizes, as for the scale bench (e.g. ``8,16,32``).
To measure a few stages again without rerunning the others (the 800-session replay takes minutes):
``EVALKIT_BENCH_STAGES_DIR=DIR`` keeps each size's run folder as ``DIR/run-N`` (it is not deleted),
and ``EVALKIT_BENCH_STAGES=aggregate,health`` runs only those stages, on the folder kept there.
"""

from __future__ import annotations

import contextlib
import os
import resource
import tempfile
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from benchmarks import Figure, benchmark, derived
from benchmarks.scale import ARMS, _sizes

SESSION_TOKENS = 40_000  # each synthetic session stops near this many tokens (uncapped: ~1 M)
# A window this small still compacts each capped session a few times (the default's 200,000 would
# not compact it at all).
REPLAY = {"window": 16_000, "reserve": 2_000, "keep_recent": 4_000, "workers": 2}
# As ``evalkit run`` runs them: the aggregate is written once after scoring and continuation,
# and health, decide and the report read it (without it each would rebuild it from the table).
STAGES = ("corpus", "replay", "score", "continuation", "aggregate", "health", "decide", "report")
FLAT = 1.2  # #35: peak RSS at the largest size at most this times the smallest's


def _experiment(n: int):
    from evalkit.contracts.config import load_experiment

    return load_experiment(
        None,
        {
            "name": "bench-stages",
            "corpus": {"kind": "synth", "sessions": n, "session_tokens": SESSION_TOKENS},
            "replay": {"arms": ARMS, **REPLAY},
            "continuation": {"workers": 2},
        },
    )


def _run_stage(stage: str, n: int, root: str) -> tuple[float, float, float]:
    """Run one stage in this (fresh) process; its peak RSS and its largest worker's (MB), and the
    CPU seconds of the process and its workers."""
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
    elif stage == "aggregate":
        from evalkit.contracts import aggregate

        aggregate.write(paths.root)
    elif stage == "health":
        run.stage_health(exp, paths)
    elif stage == "decide":
        run.stage_decide(exp, paths)
        write_warnings(paths.root, exp.config)
    else:
        run.stage_report(exp, paths)
    mb = 1024  # ru_maxrss is in kB on Linux
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    return own.ru_maxrss / mb, kids.ru_maxrss / mb, cpu


def figure_name(stage: str, n: int, whose: str) -> str:
    return f"stage {stage}: {n} sessions, peak RSS of the {whose}"


def _stages() -> list[str]:
    raw = os.environ.get("EVALKIT_BENCH_STAGES")
    chosen = [s.strip() for s in raw.split(",") if s.strip()] if raw else list(STAGES)
    unknown = [s for s in chosen if s not in STAGES]
    if unknown:
        raise ValueError(
            f"EVALKIT_BENCH_STAGES: unknown stage(s) {', '.join(unknown)} (known: {', '.join(STAGES)})"
        )
    return chosen


def _folder():
    """Where the run folders go: ``EVALKIT_BENCH_STAGES_DIR`` (kept), else a temporary folder."""
    kept = os.environ.get("EVALKIT_BENCH_STAGES_DIR")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return contextlib.nullcontext(kept)
    return tempfile.TemporaryDirectory()


def measure(n: int) -> list[Figure]:
    """Every stage (or those of ``EVALKIT_BENCH_STAGES``) of one run at ``n`` sessions, each in a
    fresh spawned process."""
    rows = []
    with _folder() as d:
        run = Path(d) / f"run-{n}"
        for stage in _stages():
            with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as ex:
                own, worker, cpu = ex.submit(_run_stage, stage, n, str(run)).result()
            rows.append(Figure(figure_name(stage, n, "stage process"), own, "MB"))
            if worker:
                rows.append(Figure(figure_name(stage, n, "largest worker"), worker, "MB"))
            rows.append(Figure(f"stage {stage}: {n} sessions, CPU (process and workers)", cpu, "s"))
        rows += _sizes_of(run, n)
    return rows


def _sizes_of(run: Path, n: int) -> list[Figure]:
    """What the run held at ``n`` sessions: the counts a stage's memory must not follow."""
    import pyarrow.parquet as pq

    events = sum(sum(1 for _ in p.open("rb")) for p in (run / "events").glob("*.jsonl"))
    out = [Figure(f"run at {n} sessions: compaction events", events, "events")]
    for name in ("metrics", "questions"):
        p = run / f"{name}.parquet"
        if p.is_file():
            out.append(
                Figure(
                    f"run at {n} sessions: {name}.parquet rows", pq.ParquetFile(p).metadata.num_rows, "rows"
                )
            )
    return out


def _size_bench(n: int) -> None:
    @benchmark(
        f"stages-{n}", f"peak RSS of each stage, each in its own process, at {n} short sessions (3 arms)"
    )
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
