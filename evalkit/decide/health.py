"""Metric health: before deciding, check that each metric can measure something in this run.

A verdict built on a metric that cannot move is not evidence. Per run, from the metrics table
and the config, this stage flags:

- **constant**: one value across every arm and session (nothing to compare);
- **constant by construction**: the backend, agent or settings fix it whatever the arms do
  (:data:`BY_CONSTRUCTION`), said with the reason even when the data happen to vary;
- **identical to the baseline**: an arm whose per-session values equal the baseline's in every
  session (the arm did not change what this metric sees; noted for its success metrics);
- **can invert under a proxy agent**: more information can score worse (:data:`INVERTS`).

An exam's per-question metrics are checked as one family (``identifier_q:*``): each question is
asked in one session, so one by one they are "constant", and listed one by one they made the
check's output grow with the corpus.

It also lists the arms whose code imports the ground truth or the probes (``shares_code``), and,
for every candidate, the metrics its verdict rests on (its success metrics and guardrails) that
are unhealthy, with a note. Everything goes to ``health.json`` in the run folder; the decide
stage and the report read it from there.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalkit.common.files import write_json
from evalkit.contracts.config import ExperimentConfig
from evalkit.contracts.metrics import question_key
from evalkit.decide.rules import Rules

HEALTH_FILE = "health.json"
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


def _session_means(m: pd.DataFrame) -> pd.DataFrame:
    ok = m[m["value"].notna()]
    return ok.groupby(["metric", "arm", "session"], sort=False, observed=True)["value"].mean().reset_index()


def _same_as_baseline(sm: pd.DataFrame, baseline: str) -> pd.Series:
    """Per (arm, metric) of the non-baseline arms: whether every session mean equals the
    baseline's in the sessions both have (pairs with no shared session are absent)."""
    base = sm[sm["arm"] == baseline].set_index(["metric", "session"])["value"].rename("base")
    cand = sm[sm["arm"] != baseline].join(base, on=["metric", "session"], how="inner")
    same = (cand["value"] - cand["base"]).abs().le(1e-12)
    return same.groupby([cand["arm"].astype(str), cand["metric"].astype(str).map(question_key)]).all()


@dataclass
class _Values:
    """Per metric, its distinct values (rounded) and value count; per (arm, metric), whether every
    session mean equals the baseline's."""

    distinct: dict[str, np.ndarray]
    rows: dict[str, int]
    same: pd.Series


def _scan(chunks: Iterable[pd.DataFrame], baseline: str) -> _Values:
    """One pass over frames of whole sessions (each session in one frame): what the checks need,
    without holding the rows or the session means."""
    parts: dict[str, list[np.ndarray]] = {}
    rows: dict[str, int] = {}
    same = []
    for m in chunks:
        ok = m[m["value"].notna()]
        for name, g in ok.groupby("metric", sort=False, observed=True):
            key = question_key(str(name))
            parts.setdefault(key, []).append(g["value"].round(12).unique())
            rows[key] = rows.get(key, 0) + len(g)
        same.append(_same_as_baseline(_session_means(m), baseline))
    distinct = {k: pd.unique(np.concatenate(v)) for k, v in sorted(parts.items())}
    same = [s for s in same if len(s)]
    joined = pd.concat(same).groupby(level=[0, 1]).all() if same else pd.Series(dtype=bool)
    return _Values(distinct, rows, joined)


def metric_flags(m: pd.DataFrame, cfg: ExperimentConfig) -> dict[str, dict[str, Any]]:
    """Per metric: its distinct value count and the reasons it is unhealthy (empty when healthy)."""
    return _flags(_scan([m], "baseline"), cfg)


def _flags(v: _Values, cfg: ExperimentConfig) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, values in v.distinct.items():
        reasons = []
        if len(values) == 1:
            reasons.append(f"constant: {values[0]:g} for every arm and session")
        cond = BY_CONSTRUCTION.get(name)
        if cond and cond[0](cfg):
            reasons.append("constant by construction: " + cond[1])
        if name in INVERTS:
            reasons.append("can invert under a proxy agent: " + INVERTS[name])
        out[name] = {"distinct_values": len(values), "rows": v.rows[name], "unhealthy": reasons}
    return out


def identical_to_baseline(m: pd.DataFrame, baseline: str = "baseline") -> dict[str, list[str]]:
    """Per arm: the metrics whose per-session mean equals the baseline's in every shared session."""
    return _identical(_same_as_baseline(_session_means(m), baseline))


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
    from evalkit.contracts.metrics_stream import session_chunks

    run_dir = Path(run_dir)
    # A run of sessions at a time (all it reads): per-session means, not rows, are kept.
    chunks = session_chunks(run_dir / "metrics.parquet", ["arm", "session", "metric", "value"])
    arms = list(cfg.replay.arms)
    baseline = rules.baseline
    scanned = _scan((t.to_pandas() for t in chunks), baseline)
    flags = _flags(scanned, cfg)
    identical = _identical(scanned.same)
    from evalkit.score.examcheck import check_exams

    # Each exam's ceiling against its floor, paired by question: a second pass over the sessions.
    chunks = session_chunks(run_dir / "metrics.parquet", ["arm", "session", "metric", "value"])
    alpha = rules.alpha
    exams = {k: v.as_dict() for k, v in check_exams((t.to_pandas() for t in chunks), alpha).items()}
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
    write_json(run_dir / HEALTH_FILE, health)
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

    notes = json.loads(p.read_text(encoding="utf-8")).get("verdict_notes", {})
    for arm, v in decision.get("verdicts", {}).items():
        ns = notes.get(arm)
        if not ns:
            continue
        v["health_notes"] = list(ns)
        if any(UNUSABLE_EXAM in n for n in ns):  # no verdict rests on an exam that cannot tell arms apart
            v["verdict"] = "untested"
        v["reason"] = f"{v.get('reason', '')} [metric health: {'; '.join(ns)}]".strip()
    write_json(run_dir / "decision.json", decision)
    return decision
