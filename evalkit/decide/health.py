"""Metric health: before deciding, check that each metric can measure something in this run.

A verdict built on a metric that cannot move is not evidence. Per run, from the run's aggregate
(:mod:`evalkit.contracts.aggregate`) and the config, this stage flags:

- **constant**: one value across every arm and session (nothing to compare);
- **constant by construction**: the backend, agent or settings fix it whatever the arms do
  (:data:`BY_CONSTRUCTION`), said with the reason even when the data happen to vary;
- **identical to the baseline**: an arm whose per-session values equal the baseline's in every
  session (the arm did not change what this metric sees; noted for its success metrics);
- **can invert under a proxy agent**: more information can score worse (:data:`INVERTS`).

An exam's per-question grades are not metrics (they are in ``questions.parquet``): each exam is
checked as a whole, its ceiling against its floor (:mod:`evalkit.score.examcheck`). A table written
before they moved out folds them as one family per exam (``identifier_q:*``).

It also lists the arms whose code imports the ground truth or the probes (``shares_code``), and,
for every candidate, the metrics its verdict rests on (its success metrics and guardrails) that
are unhealthy, with a note. Everything goes to ``health.json`` in the run folder; the decide
stage and the report read it from there.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from evalkit.contracts import aggregate, questions
from evalkit.contracts.config import ExperimentConfig
from evalkit.contracts.records import Decision, Health
from evalkit.contracts.runs import read_record, write_record
from evalkit.decide.rules import Rules

HEALTH_FILE = Health.FILE
GROUND_TRUTH = ("evalkit.facts", "evalkit.score")


def _heuristic(cfg: ExperimentConfig) -> bool:
    return cfg.continuation.agent == "heuristic"


def _no_source_budget(cfg: ExperimentConfig) -> bool:
    return not cfg.replay.summary_source_chars


# metric -> (condition on the config, reason): the metric cannot vary under that condition.
BY_CONSTRUCTION: dict[str, tuple[Callable[[ExperimentConfig], bool], str]] = {
    "stops": (
        _heuristic,
        "the heuristic agent follows the recording to its end, so it stops wherever the recording does",
    ),
    "lost_chars": (
        _no_source_budget,
        "no summary-source budget in this experiment (replay.summary_source_chars = 0): the summarizer sees "
        "the whole head, so only a hard trim can lose text unseen; seed 003's stub rule never applies "
        "(it is judged in experiments/seed003.toml)",
    ),
}

# metric -> why more information can score worse under a proxy agent. ``first_action_match`` was
# here until it was redefined (skipping a step the recording shows was redundant now matches).
INVERTS: dict[str, str] = {}


def metric_flags(m: pd.DataFrame, cfg: ExperimentConfig) -> dict[str, dict[str, Any]]:
    """Per metric of a metrics frame: its value count, least and greatest value, and the reasons
    it is unhealthy (empty when healthy)."""
    return _flags(aggregate.of_frame(m), cfg)


def _flags(agg: pa.Table, cfg: ExperimentConfig) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, r in aggregate.per_metric(agg).iterrows():
        reasons = []
        # Rounded as values were compared before: sums of shares differ in the last bits.
        if round(float(r["lo"]), 12) == round(float(r["hi"]), 12):
            reasons.append(f"constant: {r['lo']:g} for every arm and session")
        cond = BY_CONSTRUCTION.get(name)
        if cond and cond[0](cfg):
            reasons.append("constant by construction: " + cond[1])
        if name in INVERTS:
            reasons.append("can invert under a proxy agent: " + INVERTS[name])
        out[name] = {"rows": int(r["n"]), "range": [float(r["lo"]), float(r["hi"])], "unhealthy": reasons}
    return out


def identical_to_baseline(m: pd.DataFrame, baseline: str = "baseline") -> dict[str, list[str]]:
    """Per arm: the metrics whose per-session mean equals the baseline's in every shared session."""
    return _identical(aggregate.same_as_baseline(aggregate.of_frame(m), baseline))


def _identical(same: pd.Series) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for (arm, metric), v in same.sort_index().items():
        if v:
            out.setdefault(str(arm), []).append(str(metric))
    return out


def _imports(module: str) -> set[str]:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return set()
    out = set()
    for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def _policy_modules(arm: str) -> set[str]:
    """Modules holding the code an arm changes relative to the baseline policy."""
    from evalkit.replay.candidates import policy_for
    from evalkit.replay.compactor import Policy

    base, pol = Policy(), policy_for(arm)
    mods = set()
    for f in fields(Policy):
        v, b = getattr(pol, f.name), getattr(base, f.name)
        if v == b:
            continue
        items = v if isinstance(v, tuple) else (v,)
        for it in items:
            if callable(it):
                mod = inspect.getmodule(it)
                if mod is not None:
                    mods.add(mod.__name__)
        if f.name == "renderer":
            mods.add("evalkit.replay.render")
    return mods


def shared_code(arms: list[str]) -> dict[str, list[str]]:
    """Per arm: "module imports X" for each of its modules importing the ground truth or a probe."""
    out: dict[str, list[str]] = {}
    for arm in arms:
        try:
            mods = _policy_modules(arm)
        except Exception:  # an external or unknown arm: nothing to inspect here
            continue
        notes = sorted(
            f"{mod} imports {imp}" for mod in mods for imp in _imports(mod) if imp.startswith(GROUND_TRUTH)
        )
        if notes:
            out[arm] = notes
    return out


# The question table's columns an exam's check reads (evalkit.score.examcheck.question_means).
EXAM_COLUMNS = ["exam", "arm", "session", "question", "grade"]
UNUSABLE_EXAM = "unusable exam"  # a verdict note that makes the verdict untested (annotate_decision)


def verdict_notes(
    rules: Rules,
    flags: dict[str, dict[str, Any]],
    identical: dict[str, list[str]],
    arms: list[str],
    exams: dict[str, dict[str, Any]] | None = None,
) -> dict[str, list[str]]:
    """Per candidate: one note per metric its verdict rests on that is unhealthy for it (an exam
    that failed its ceiling-vs-floor check, :mod:`evalkit.score.examcheck`, among them)."""
    from evalkit.score.examcheck import exam_of

    guardrails = list(rules.guardrails)
    out: dict[str, list[str]] = {}
    for arm in arms:
        spec = rules.for_candidate(arm)
        if spec is None:
            continue
        success = list(spec.success)
        notes = []
        for metric in dict.fromkeys(success + [g for g in guardrails if g not in success]):
            role = "success metric" if metric in success else "guardrail"
            info = flags.get(metric)
            if info is None:
                notes.append(f"{role} {metric}: no values in this run")
                continue
            notes.extend(f"{role} {metric}: {r}" for r in info["unhealthy"])
            check = (exams or {}).get(exam_of(metric) or "")
            if check is not None and not check["usable"]:
                notes.append(f"{role} {metric}: {UNUSABLE_EXAM} ({check['exam']}): {check['reason']}")
            # A guardrail equal to the baseline did no harm; a success metric equal to it is no evidence.
            if metric in success and metric in identical.get(arm, []):
                notes.append(f"{role} {metric}: identical to the baseline in every session")
        if notes:
            out[arm] = notes
    return out


def check_run(run_dir: str | Path, cfg: ExperimentConfig, rules: Rules) -> dict[str, Any]:
    """Compute the run's metric health and write ``health.json``; returns what was written
    (``rules``: those the decide stage applies)."""
    from evalkit.score.examcheck import CEILING, FLOOR, check_exams

    run_dir = Path(run_dir)
    # Per-session sums (the run's aggregate), not rows: what the metric checks need, and only the
    # columns they read, with each arm, metric and session name held once (the keys encoded).
    agg = aggregate.load(run_dir, ["arm", "metric", "session", "n", "sum", "min", "max"], encoded=True)
    arms = list(cfg.replay.arms)
    baseline = rules.baseline
    flags = _flags(agg, cfg)
    identical = _identical(aggregate.same_as_baseline(agg, baseline))
    # Each exam's ceiling against its floor, paired by question (the question table).
    alpha = rules.alpha
    # Only the two arms an exam is checked on are read: the table holds every arm's questions.
    asked = questions.read(run_dir, arms=(CEILING, FLOOR), columns=EXAM_COLUMNS)
    exams = {k: v.as_dict() for k, v in check_exams(asked, alpha).items()}
    health = {
        "metrics": flags,
        "unhealthy": sorted(k for k, v in flags.items() if v["unhealthy"]),
        "identical_to_baseline": identical,
        "shares_code": shared_code([a for a in arms if a != baseline]),
        "verdict_notes": verdict_notes(rules, flags, identical, [a for a in arms if a != baseline], exams),
        "exams": exams,
        "unusable_exams": sorted(
            k for k, v in exams.items() if not v["usable"] and v["reason"] != "not asked in this run"
        ),
    }
    write_record(run_dir, Health, health)
    return health


def annotate_decision(run_dir: str | Path, decision: dict) -> dict:
    """Join ``health.json``'s notes onto the verdicts of ``decision.json`` (rewritten in place).

    Each verdict resting on an unhealthy metric gets ``health_notes`` (the notes) and its
    ``reason`` a closing clause saying so, so the verdict itself, not only the report's health
    section, says what it cannot rest on. The decide stage's logic is untouched; a run without
    ``health.json`` is left as it is.
    """
    run_dir = Path(run_dir)
    p = run_dir / HEALTH_FILE
    if not p.exists():
        return decision

    notes = read_record(run_dir, Health, required=True).verdict_notes
    for arm, v in decision.get("verdicts", {}).items():
        ns = notes.get(arm)
        if not ns:
            continue
        v["health_notes"] = list(ns)
        if any(UNUSABLE_EXAM in n for n in ns):  # no verdict rests on an exam that cannot tell arms apart
            v["verdict"] = "untested"
        v["reason"] = f"{v.get('reason', '')} [metric health: {'; '.join(ns)}]".strip()
    write_record(run_dir, Decision, decision)
    return decision
