"""The offline judge's reading budget, chosen on held-out sessions (docs/probe-banks.md).

The offline judge (:mod:`evalkit.models.offline_judge`) quotes at most ``max_chars`` of the
context. Too small a budget and it cannot find, in the full history, answers that are there: the
`uncompacted` ceiling then measures the reader's capacity, not retention. So the budget is chosen
per run by a rule stated before it was measured, looking only at the reader's own capacity:

1. split the sessions by a hash of their id: about a third *calibration*, the rest *reported*;
2. on the calibration part only, score the ceiling arm's generated exam at each budget of ``GRID``;
3. take the smallest budget within ``TOLERANCE`` points of the grid's maximum;
4. score every arm at that budget; the scorecard reports the generated exam on the reported part.

No candidate arm is looked at in steps 1–3. ``[score] judge_budget = "calibrate"`` runs this inside
``evalkit run``; ``evalkit judge-budget RUN`` does it for an existing run. The result is written to
``judge-budget.json`` in the run folder, which the report's scorecard reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from evalkit.contracts.event import events_path
from evalkit.contracts.metrics import read_metrics
from evalkit.contracts.records import JudgeBudget
from evalkit.contracts.runs import RunPaths, read_record, write_record
from evalkit.models.offline_judge import LABEL
from evalkit.score.suite import Suite

FILE = JudgeBudget.FILE
GRID = (2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000)
TOLERANCE = 1.0  # points of %: "within 1 point of the grid's maximum"
CEILING = "uncompacted"
METRIC = "judge_offline_overall"  # 0-5
CALIBRATION, REPORTED = "calibration", "reported"
_SALT = "judge-budget:"
_PARTS = 3  # one part in three calibrates
RULE = (
    "calibration part: sessions with int(sha256('judge-budget:' + id)[:8], 16) % 3 == 0; on it only, "
    f"the `{CEILING}` arm's `{METRIC}` (mean of per-session means, %) at each budget of the grid; "
    f"the smallest budget within {TOLERANCE:g} point of the grid's maximum; the scorecard's generated "
    "exam is reported on the other sessions"
)


def part(session_id: str) -> str:
    """Which part of the held-out split a session belongs to: ``calibration`` or ``reported``."""
    h = int(hashlib.sha256((_SALT + session_id).encode("utf-8")).hexdigest()[:8], 16)
    return CALIBRATION if h % _PARTS == 0 else REPORTED


def split(session_ids: Iterable[str]) -> dict[str, list[str]]:
    """The sessions of each part, sorted."""
    out: dict[str, list[str]] = {CALIBRATION: [], REPORTED: []}
    for s in sorted(set(session_ids)):
        out[part(s)].append(s)
    return out


def choose_budget(sweep: Mapping[int, float], tolerance: float = TOLERANCE) -> int:
    """The smallest budget whose score (in %) is within ``tolerance`` points of the best one."""
    scored = {b: s for b, s in sweep.items() if s == s}  # NaN: no question was asked
    if not scored:
        raise ValueError("judge budget: the ceiling arm was asked no question on the calibration sessions")
    best = max(scored.values())
    return min(b for b, s in scored.items() if s >= best - tolerance)


@dataclass
class Calibration:
    """What ``judge-budget.json`` holds."""

    budget: int
    sweep: dict[int, dict[str, float]]  # budget -> mean (%), half (95% t, points), n (sessions)
    calibration: list[str]  # the calibration part's session ids (all of them, asked or not)
    reported: list[str]
    grid: list[int] = field(default_factory=lambda: list(GRID))
    tolerance: float = TOLERANCE
    arm: str = CEILING
    metric: str = METRIC
    rule: str = RULE
    reader: str = LABEL

    def to_json(self) -> str:
        d = asdict(self)
        d["sweep"] = {str(b): v for b, v in self.sweep.items()}
        return json.dumps(d, indent=1, sort_keys=True) + "\n"


def load(run_dir: str | os.PathLike) -> Calibration | None:
    """The run's calibration, or None when it has none."""
    rec = read_record(run_dir, JudgeBudget)
    if rec is None:
        return None
    d = rec.model_dump(mode="json", exclude_unset=True, exclude={"schema_version"})
    d["sweep"] = {int(b): v for b, v in d["sweep"].items()}
    return Calibration(**d)


def forget(run_dir: str | os.PathLike) -> bool:
    """Remove the run's calibration (its metrics are being re-scored at the suite's budget);
    True when there was one."""
    p = Path(run_dir) / FILE
    existed = p.is_file()
    p.unlink(missing_ok=True)
    return existed


def with_budget(suite: Suite, budget: int) -> Suite:
    """``suite`` with the judge probe's ``max_chars`` set to ``budget``."""
    if "judge" not in suite.names():
        raise ValueError(f"judge budget: suite {suite.name!r} ({suite.source}) has no judge probe")
    probes = [(n, {**p, "max_chars": budget} if n == "judge" else p) for n, p in suite.probes]
    return replace(suite, name=f"{suite.name}+judge_budget={budget}", probes=probes)


def ceiling_sweep(
    run_dir: str | os.PathLike,
    sessions: list[str],
    suite: Suite,
    grid: Iterable[int] = GRID,
    workers: int = 0,
) -> dict[int, dict[str, float]]:
    """The ceiling arm's generated exam on ``sessions`` at each budget (mean %, half, n).

    Scored in a scratch folder holding only the ceiling arm's events of those sessions, beside the
    run's corpus (its pinned questions), so the run's metrics are untouched."""
    from evalkit.contracts.metrics_sessions import arm_summary
    from evalkit.score.stage import score_run

    run = Path(run_dir)
    src = events_path(run, CEILING)
    if not src.is_file():
        raise ValueError(
            f"judge budget: {src}: no events of the ceiling arm `{CEILING}` (add it to [replay] arms)"
        )
    keep = set(sessions)
    # the offline judge is what has a budget: graded offline whatever the run's model
    judge = {**next(p for n, p in suite.probes if n == "judge"), "backend": "offline"}
    out: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="judge-budget-") as tmp:
        scratch = Path(tmp)
        (scratch / "corpus").symlink_to((run / "corpus").resolve())
        if RunPaths(run).config.is_file():
            shutil.copy(RunPaths(run).config, RunPaths(scratch).config)
        dst = events_path(scratch, CEILING)
        dst.parent.mkdir()
        with open(src, encoding="utf-8") as fh, open(dst, "w", encoding="utf-8") as w:
            w.writelines(ln for ln in fh if ln.strip() and json.loads(ln).get("session") in keep)
        for b in grid:
            score_run(
                scratch,
                [CEILING],
                suite=Suite("judge", [("judge", {**judge, "max_chars": b})]),
                workers=workers,
            )
            s = arm_summary(read_metrics(RunPaths(scratch).metrics), METRIC, 5.0)
            r = s.loc[CEILING] if CEILING in s.index else None
            out[b] = (
                {"mean": 100 * r["mean"], "half": 100 * r["half"], "n": int(r["n"])}
                if r is not None
                else {"mean": float("nan"), "half": float("nan"), "n": 0}
            )
    return out


def calibrate(
    run_dir: str | os.PathLike, suite: Suite, grid: Iterable[int] = GRID, workers: int = 0
) -> tuple[Calibration, Suite]:
    """Choose the budget by the rule, write ``judge-budget.json``; returns it and the suite to
    score the run with."""
    from evalkit.common.files import index_jsonl

    run = Path(run_dir)
    parts = split(index_jsonl(run / "corpus" / "sessions.jsonl", "id").keys())
    grid = sorted(grid)
    sweep = ceiling_sweep(run, parts[CALIBRATION], suite, grid, workers)
    budget = choose_budget({b: v["mean"] for b, v in sweep.items()})
    cal = Calibration(budget, sweep, parts[CALIBRATION], parts[REPORTED], grid=list(grid))
    write_record(run, JudgeBudget, json.loads(cal.to_json()))
    return cal, with_budget(suite, budget)


def describe(cal: Calibration) -> str:
    """One line: the chosen budget and what it was chosen on."""
    n = max((v["n"] for v in cal.sweep.values()), default=0)
    sweep = ", ".join(f"{b:,}: {v['mean']:.1f}" for b, v in sorted(cal.sweep.items()))
    return (
        f"judge budget {cal.budget:,} chars, chosen on {n} calibration sessions with questions "
        f"({len(cal.calibration)} in the calibration part; {len(cal.reported)} reported); "
        f"`{cal.arm}` {cal.metric} % by budget: {sweep}"
    )
