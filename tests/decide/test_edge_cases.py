"""One test per defect of issue #14, each through ``decide`` on a constructed metrics table.

Every test here failed on the code before the sign-flip rewrite (the bootstrap decide stage).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalkit.contracts.metrics import COLUMNS, normalize
from evalkit.decide import decide, parse_rules

ROOT = Path(__file__).resolve().parents[2]


def rules(min_effect=0.05, margin=0.02, **kw):
    raw = {
        "resamples": 2000,
        "min_sessions": 20,
        "metrics": {
            "m": {"direction": "higher", "min_effect": min_effect, "margin": margin, **kw},
            "g": {"direction": "higher", "min_effect": 0.05, "margin": margin},
        },
        "candidates": {"cand": {"success": ["m"], "guardrails": ["g"]}},
    }
    return raw


def frame(rows) -> pd.DataFrame:
    return normalize(pd.DataFrame(rows, columns=COLUMNS))


def paired_table(base: np.ndarray, cand: dict[str, np.ndarray], metric: str = "m", guard: bool = True) -> list:
    """Rows for a baseline and candidates, one event per session; the guardrail g is equal in both arms."""
    rows = []
    for s, b in enumerate(base):
        rows.append(("r", "baseline", f"s{s:03d}", 0, 0, 0, metric, float(b), None))
        if guard:
            rows.append(("r", "baseline", f"s{s:03d}", 0, 0, 0, "g", 0.9, None))
        for arm, v in cand.items():
            if s < len(v) and v[s] is not None:
                rows.append(("r", arm, f"s{s:03d}", 0, 0, 0, metric, float(v[s]), None))
                if guard:
                    rows.append(("r", arm, f"s{s:03d}", 0, 0, 0, "g", 0.9, None))
    return rows


def test_many_arms_do_not_overflow():
    """Issue #14, defect 1."""
    rng = np.random.default_rng(0)
    arms = {f"c{i:03d}": rng.normal(size=20) for i in range(130)}
    raw = rules(min_effect=0.0)
    raw["candidates"] = {a: {"success": ["m"], "guardrails": []} for a in arms}
    d = decide(frame(paired_table(rng.normal(size=20), arms, guard=False)), parse_rules(raw, "t"))
    assert len(d["verdicts"]) == 130 and {v["verdict"] for v in d["verdicts"].values()} <= {"inconclusive", "drop", "ship"}


def test_sparse_differences_do_not_ship():
    """Issue #14, defect 2."""
    # 4 of 200 sessions differ, all in the candidate's favour: the null chance is 2^-4 = 6.25%.
    base = np.zeros(200)
    cand = base.copy()
    cand[:4] = 1.0
    d = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(min_effect=0.0), "t"))
    v = d["verdicts"]["cand"]
    assert v["verdict"] == "inconclusive", v["reason"]
    assert v["metrics"]["m"]["p_value"] == pytest.approx(1 / 16)  # exact enumeration of 2^4 sign patterns
    cand[:8] = 1.0  # 2^-8 < α: eight sessions, all better, do ship
    d = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(min_effect=0.0), "t"))
    assert d["verdicts"]["cand"]["verdict"] == "ship"
    assert d["verdicts"]["cand"]["metrics"]["m"]["p_value"] == pytest.approx(1 / 256)


def test_identical_arms_are_untested_and_prompt_only_says_so():
    """Issue #14, defect 3."""
    base = np.random.default_rng(1).normal(size=40)
    t = frame(paired_table(base, {"cand": base.copy()}))
    v = decide(t, parse_rules(rules(), "t"))["verdicts"]["cand"]
    assert v["verdict"] == "untested" and "no session differs from the baseline" in v["reason"]
    assert "prompt-only" not in v["reason"]
    v = decide(t, parse_rules(rules(), "t"), prompt_only=lambda arm: arm == "cand")["verdicts"]["cand"]
    assert "prompt-only change; the offline stand-in cannot judge it" in v["reason"]


def test_default_candidates_flag_prompt_only_changes():
    """Issue #14, defect 3."""
    from evalkit.decide.stage import prompt_only_arms

    check = prompt_only_arms("extractive")
    assert check is not None and check("short") and check("bridge+short") and not check("head-tail")


def test_power_and_sessions_needed_test_against_the_min_effect():
    """Issue #14, defect 4."""
    rng = np.random.default_rng(2)
    base = rng.normal(size=40)
    cand = base + 0.3 + rng.normal(0, 0.2, size=40)
    # The target equals the min effect: the ship test (H0: effect ≤ min effect) has power α there.
    d = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(min_effect=0.3, target=0.3), "t"))
    m = d["verdicts"]["cand"]["metrics"]["m"]
    assert m["power"] == pytest.approx(0.025, abs=0.005)
    assert m["sessions_needed"] is None  # no number of sessions gives power at the null itself
    assert m["mde"] > 0.3  # the MDE is an effect beyond the min effect


def test_error_share_is_per_arm():
    """Issue #14, defect 5."""
    base = np.random.default_rng(3).normal(size=100)
    rows = paired_table(base, {"cand": base + 1.0})
    cand_m = [i for i, r in enumerate(rows) if r[1] == "cand" and r[6] == "m"]
    for i in cand_m[:9]:  # 9% of the candidate's values fail to score; the baseline's are all fine
        rows[i] = (*rows[i][:7], float("nan"), "scorer crashed")
    v = decide(frame(rows), parse_rules(rules(), "t"))["verdicts"]["cand"]
    assert v["verdict"] == "untested" and "candidate arm 9/100" in v["reason"]


def test_lost_sessions_are_a_candidate_failure():
    """Issue #14, defect 6."""
    base = np.random.default_rng(4).normal(size=60)
    cand = list(base + 1.0)
    for s in range(0, 60, 6):  # the candidate lost 10 of 60 sessions; it is far better on the rest
        cand[s] = None
    v = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(), "t"))["verdicts"]["cand"]
    assert v["verdict"] == "drop" and "lost 10 sessions" in v["reason"]
    assert v["lost_sessions"] == 10 and v["metrics"]["m"]["lost_sessions"] == 10
    cand = list(base + 1.0)
    cand[5] = None  # one lost session: not significant on its own, but it blocks a ship
    v = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(), "t"))["verdicts"]["cand"]
    assert v["verdict"] == "inconclusive" and "lost 1 sessions" in v["reason"]


def test_non_finite_values_are_errors():
    """Issue #14, defect 7."""
    base = np.random.default_rng(5).normal(size=200)
    cand = base + 1.0
    cand[7] = np.inf
    d = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(), "t"))
    v = d["verdicts"]["cand"]
    assert v["verdict"] == "ship" and v["metrics"]["m"]["errors"] == 1
    assert v["metrics"]["m"]["estimate"] == pytest.approx(1.0)


def test_many_success_tests_are_not_held_back_by_a_p_value_floor():
    """Issue #14, defect 8."""
    base = np.random.default_rng(6).normal(0, 0.1, size=20)
    arms = {f"c{i:02d}": base + 0.5 for i in range(30)}
    raw = rules()
    raw["candidates"] = {a: {"success": ["m"], "guardrails": []} for a in arms}
    d = decide(frame(paired_table(base, arms, guard=False)), parse_rules(raw, "t"))
    assert {v["verdict"] for v in d["verdicts"].values()} == {"ship"}


def test_standard_error_cut_off_is_relative_to_the_metric_units():
    """Issue #14, defect 9."""
    rng = np.random.default_rng(7)
    base = rng.normal(0, 1e-13, size=40)  # e.g. a cost in millions of dollars per token
    cand = base + rng.normal(0, 1e-14, size=40)
    d = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(min_effect=0.0), "t"))
    m = d["verdicts"]["cand"]["metrics"]["m"]
    assert 2e-15 < m["mde"] < 2e-14  # (t* + t_0.8) × a real SE of ~1.6e-15, not zero
    assert m["ci"][1] - m["ci"][0] > 1e-15


def test_n_is_per_metric_and_a_thin_guardrail_does_not_untest():
    """Issue #14, defect 10."""
    rng = np.random.default_rng(8)
    base = rng.normal(size=60)
    rows = paired_table(base, {"cand": base + 1.0}, guard=False)
    for s in range(10):  # the guardrail applies to 10 of 60 sessions only
        for arm in ("baseline", "cand"):
            rows.append(("r", arm, f"s{s:03d}", 0, 0, 0, "g", 0.9, None))
    v = decide(frame(rows), parse_rules(rules(), "t"))["verdicts"]["cand"]
    assert v["verdict"] == "inconclusive" and "guardrail g has only 10 sessions" in v["reason"]
    # n is the deciding metric's own, the one the reason quotes; the success metric keeps all 60 sessions
    assert v["deciding_metric"] == "g" and v["n_sessions"] == 10
    assert v["metrics"]["m"]["n_sessions"] == 60 and v["metrics"]["g"]["n_sessions"] == 10


def test_bca_is_not_offered_and_the_docs_say_why():
    """Issue #14, defect 11."""
    base = np.random.default_rng(9).normal(size=40)
    d = decide(frame(paired_table(base, {"cand": base + 1.0})), parse_rules(rules(), "t"))
    m = d["verdicts"]["cand"]["metrics"]["m"]
    assert "ci_bca" not in m and "bca" not in m
    doc = (ROOT / "docs/rules.md").read_text()
    assert "BCa" in doc and "81" in doc


def test_an_mde_beyond_a_0_1_metrics_range_is_reported_as_unreachable():
    """A 0/1 metric at 90% in the baseline cannot improve by more than 0.1: an MDE above that is
    not a number to plan with; the reason says so, and decision.json has no MDE but the one needed."""
    base = np.ones(20)
    base[[3, 11]] = 0.0
    cand = base.copy()
    cand[[3, 5, 11, 17]] = [1.0, 0.0, 1.0, 0.0]  # two sessions gained, two lost: no effect
    d = decide(frame(paired_table(base, {"cand": cand})), parse_rules(rules(min_effect=0.05), "t"))
    v = d["verdicts"]["cand"]
    m = v["metrics"]["m"]
    assert v["verdict"] == "inconclusive"
    assert m["mde"] is None and m["mde_exceeds_range"] is True
    assert m["mde_needed"] > m["headroom"] == pytest.approx(0.1)
    assert "no reachable MDE" in v["reason"] and "beyond the metric's range" in v["reason"]
    # A metric that is not 0/1 keeps its MDE.
    d = decide(frame(paired_table(base + 0.5, {"cand": cand + 0.5})), parse_rules(rules(min_effect=0.05), "t"))
    assert d["verdicts"]["cand"]["metrics"]["m"]["mde"] > 0.1


def test_a_ship_needs_the_printed_t_interval_beyond_the_threshold():
    """Heavy-tailed differences where the exact sign-flip test at 0 rejects but the t interval still
    includes 0: the verdict is not ship (before, it shipped beside an interval [sign-flip] that the
    report printed while the clustered t interval crossed 0). decision.json names the printed interval."""
    from tests.decide.test_stats import AT_MARGIN

    diffs = np.array(AT_MARGIN) + 0.1868
    base = np.linspace(1.0, 2.0, 20)
    d = decide(frame(paired_table(base, {"cand": base + diffs})), parse_rules(rules(min_effect=0.0), "t"))
    v = d["verdicts"]["cand"]
    m = v["metrics"]["m"]
    assert d["stats"]["printed_interval"] == "t" and "clustered-SE t" in d["stats"]["interval"]
    assert m["ci"][0] < 0 < m["ci_sign_flip"][0]  # the sign-flip interval alone excludes 0
    assert m["p_value"] > 0.025 and v["verdict"] == "inconclusive"
    assert "[-0.0479, 0.989], p_holm=0.036 ≥ α 0.025" in v["reason"]  # the printed interval is the t one
