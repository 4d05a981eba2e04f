"""Metric health: flags are computed from real metric tables and config, and reach the report."""

from __future__ import annotations

import json

import pandas as pd

from evalkit.contracts.config import validate_config
from evalkit.contracts.metrics_stream import write_metrics
from evalkit.decide.health import (
    HEALTH_FILE,
    annotate_decision,
    check_run,
    identical_to_baseline,
    metric_flags,
    shared_code,
    verdict_notes,
)
from evalkit.decide.rules import parse_rules

CFG = validate_config(
    {
        "replay": {"arms": ["baseline", "a", "b"], "summary_source_chars": 0},
        "continuation": {"agent": "heuristic"},
    },
    "test",
)
RULES = parse_rules(
    {
        "baseline": "baseline",
        "guardrails": ["g"],
        "metrics": {m: {"direction": "higher"} for m in ("g", "varies", "flat", "lost_chars")},
        "candidates": {"a": {"success": ["varies"]}, "b": {"success": ["flat", "lost_chars"]}},
    },
    "test",
)


def _row(arm: str, session: str, metric: str, value: float) -> dict:
    return {
        "run": "r",
        "arm": arm,
        "session": session,
        "event": 0,
        "round": 1,
        "replicate": 0,
        "metric": metric,
        "value": value,
        "error": None,
    }


def _table() -> pd.DataFrame:
    rows = []
    for arm in ("baseline", "a", "b"):
        for s in range(4):
            for metric, value in (
                ("flat", 1.0),
                ("varies", s + (0.5 if arm == "a" else 0.0)),
                ("g", float(s)),
                ("lost_chars", 0.0),
                ("stops", 1.0 if s else 0.0),
            ):
                rows.append(_row(arm, f"s{s}", metric, value))
    return pd.DataFrame(rows)


def test_flags_constant_by_construction_and_identical():
    m = _table()
    flags = metric_flags(m, CFG)
    assert flags["flat"]["unhealthy"] == ["constant: 1 for every arm and session"]
    assert flags["varies"]["unhealthy"] == [] and flags["g"]["unhealthy"] == []
    assert any(r.startswith("constant by construction") for r in flags["lost_chars"]["unhealthy"])
    assert any(r.startswith("constant by construction") for r in flags["stops"]["unhealthy"])
    ident = identical_to_baseline(m)
    assert "varies" not in ident["a"] and "varies" in ident["b"] and "g" in ident["a"]
    notes = verdict_notes(RULES, flags, ident, ["a", "b"])
    assert "a" not in notes  # its success metric moved; an unchanged guardrail is no problem
    assert "success metric lost_chars: identical to the baseline in every session" in notes["b"]
    assert any(n.startswith("success metric flat: constant") for n in notes["b"])
    # With a source budget, lost_chars is no longer constant by construction.
    budget = CFG.model_copy(update={"replay": CFG.replay.model_copy(update={"summary_source_chars": 65536})})
    assert not any("construction" in r for r in metric_flags(m, budget)["lost_chars"]["unhealthy"])


def test_check_run_writes_health_json_and_the_report_shows_it(tmp_path):
    write_metrics(_table(), tmp_path / "metrics.parquet")
    h = check_run(tmp_path, CFG, RULES)
    on_disk = json.loads((tmp_path / HEALTH_FILE).read_text())
    assert on_disk["unhealthy"] == h["unhealthy"] == ["flat", "lost_chars", "stops"]
    from evalkit.report.data import load_report_data
    from evalkit.report.sections.health import section_health

    text = "\n".join(section_health(load_report_data(tmp_path), tmp_path))
    assert "`flat`" in text and "`b`" in text and "Verdicts that rest on an unhealthy metric" in text


def test_shared_code_names_the_module_that_imports_the_ground_truth():
    got = shared_code(["head-tail", "validate", "short"])
    assert "validate" not in got and "short" not in got
    assert all("imports evalkit.facts" in n or "imports evalkit.score" in n for n in got.get("head-tail", []))


def test_a_verdict_resting_on_an_unhealthy_metric_says_so_in_decision_json(tmp_path):
    write_metrics(_table(), tmp_path / "metrics.parquet")
    check_run(tmp_path, CFG, RULES)
    decision = {
        "verdicts": {
            "a": {"verdict": "ship", "reason": "ship: varies +0.5"},
            "b": {"verdict": "inconclusive", "reason": "inconclusive: flat +0"},
        }
    }
    annotate_decision(tmp_path, decision)
    on_disk = json.loads((tmp_path / "decision.json").read_text())
    assert on_disk["verdicts"]["a"] == {"verdict": "ship", "reason": "ship: varies +0.5"}
    b = on_disk["verdicts"]["b"]
    assert b["reason"].startswith("inconclusive: flat +0 [metric health: success metric flat: constant")
    assert "success metric lost_chars: identical to the baseline in every session" in b["health_notes"]


def test_an_exams_questions_in_an_older_table_are_checked_as_one_family():
    # Before questions.parquet, the grades were metrics. Each question is asked in one session and graded 1 there under every arm: one by one,
    # every question is "constant", yet the family's grades vary (s1's question is missed).
    rows = []
    for s in range(3):
        for arm in ("baseline", "a"):
            rows.append(_row(arm, f"s{s}", f"identifier_q:symbol:{s:04x}", 0.0 if s == 1 else 1.0))
            rows.append(_row(arm, f"s{s}", "identifier_exam", 0.0 if s == 1 else 1.0))
        rows.append(_row("b", f"s{s}", f"identifier_q:symbol:{s:04x}", 1.0))
        rows.append(_row("b", f"s{s}", f"judge_offline_q:{s}", 3.0))
    flags = metric_flags(pd.DataFrame(rows), CFG)
    assert not any(k.startswith("identifier_q:symbol") for k in flags)
    assert flags["identifier_q:*"] == {"rows": 9, "range": [0.0, 1.0], "unhealthy": []}
    # a family whose every grade is the same is as constant as any metric
    assert flags["judge_offline_q:*"]["unhealthy"] == ["constant: 3 for every arm and session"]
    ident = identical_to_baseline(pd.DataFrame(rows))
    assert "identifier_q:*" in ident["a"] and "identifier_q:*" not in ident.get("b", [])
