"""Ship rules and verdicts: every path of untested → drop → ship → inconclusive, on constructed tables."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from evalkit.contracts.metrics import COLUMNS, normalize
from evalkit.decide import decide, stats, summarize_metrics
from evalkit.decide.rules import RulesError, parse_rules, read_rules_file, resolve_rules

RULES = {
    "alpha": 0.025,
    "resamples": 2000,
    "min_sessions": 20,
    "guardrails": ["constraints_kept"],
    "metrics": {
        "tally_present": {"direction": "higher", "min_effect": 0.05, "margin": 0.02},
        "constraints_kept": {"direction": "higher", "min_effect": 0.05, "margin": 0.02},
        "summary_tokens": {"direction": "lower", "min_effect": "10%", "margin": "20%"},
        "refail_30": {"direction": "lower", "min_effect": 0.02, "margin": 0.02},
    },
    "candidates": {
        "win": {"success": ["tally_present"]},
        "lose": {"success": ["tally_present"]},
        "breaks-guard": {"success": ["tally_present"]},
        "noisy-guard": {"success": ["tally_present"]},
        "flat": {"success": ["tally_present"]},
        "short": {"success": ["summary_tokens"], "guardrails": ["tally_present"]},
        "continuation": {"success": ["refail_30"]},
    },
}

# (tally_present shift, constraints_kept shift, constraints noise sd, summary_tokens factor)
ARMS = {
    "baseline": (0.0, 0.0, 0.0, 1.0),
    "aa": (0.0, 0.0, 0.0, 1.0),
    "win": (0.25, 0.0, 0.0, 1.0),
    "lose": (-0.2, 0.0, 0.0, 1.0),
    "breaks-guard": (0.25, -0.3, 0.0, 1.0),
    "noisy-guard": (0.25, 0.0, 0.4, 1.0),
    "flat": (0.0, 0.0, 0.0, 1.0),
    "short": (0.0, 0.0, 0.0, 0.5),
}


def table(sessions: int = 40, arms=ARMS, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(sessions):
        u = rng.normal(0, 0.1)
        for e in range(1 + s % 3):
            tally = float(np.clip(0.4 + u + rng.normal(0, 0.1), 0, 1))
            tokens = 1500 + 300 * u + rng.normal(0, 50)
            for arm, (dt, dc, sd, f) in arms.items():
                noise = rng.normal(0, 0.03) if arm not in ("baseline", "aa") else 0.0
                rows.append(("r", arm, f"s{s:02d}", e, e, 0, "tally_present", tally + dt + noise, None))
                rows.append(
                    (
                        "r",
                        arm,
                        f"s{s:02d}",
                        e,
                        e,
                        0,
                        "constraints_kept",
                        0.8 + dc + rng.normal(0, sd or 1e-9) * (sd > 0),
                        None,
                    )
                )
                rows.append(("r", arm, f"s{s:02d}", e, e, 0, "summary_tokens", tokens * f, None))
    return normalize(pd.DataFrame(rows, columns=COLUMNS))


@pytest.fixture(scope="module")
def decision():
    arms = {**ARMS, "continuation": ARMS["flat"]}
    return decide(table(arms=arms), parse_rules(RULES, "test rules"), [*arms, "ghost"])


def test_every_verdict_path(decision):
    v = {c: d["verdict"] for c, d in decision["verdicts"].items()}
    assert v == {
        "win": "ship",
        "lose": "drop",
        "breaks-guard": "drop",
        "noisy-guard": "inconclusive",
        "flat": "inconclusive",
        "short": "ship",
        "continuation": "untested",
        "ghost": "untested",
    }


def test_reasons_carry_the_rule_and_the_numbers(decision):
    d = decision["verdicts"]
    win = d["win"]
    assert win["deciding_metric"] == "tally_present"
    m = win["metrics"]["tally_present"]
    assert win["reason"].startswith(f"ship: tally_present +{m['estimate']:.3g} [")
    assert "p_holm" in win["reason"] and "beyond min effect +0.05" in win["reason"]
    assert m["ci"][0] > 0.05 and m["p_holm"] < 0.025 and m["role"] == "success" and m["threshold"] == 0.05
    assert "constraints_kept" in win["metrics"] and win["metrics"]["constraints_kept"]["role"] == "guardrail"
    assert (
        "success metric tally_present" in d["lose"]["reason"] and "significantly worse" in d["lose"]["reason"]
    )
    assert d["breaks-guard"]["deciding_metric"] == "constraints_kept"
    assert (
        "guardrail constraints_kept" in d["breaks-guard"]["reason"]
        and "margin -0.02" in d["breaks-guard"]["reason"]
    )
    assert "not shown within its margin" in d["noisy-guard"]["reason"]
    assert "no success metric significantly beyond its min effect" in d["flat"]["reason"]
    assert "MDE" in d["flat"]["reason"] and "needed" in d["flat"]["reason"]
    # a relative min effect is resolved against the baseline mean and said so
    st = d["short"]["metrics"]["summary_tokens"]
    assert st["direction"] == "lower" and st["threshold"] == pytest.approx(-0.1 * st["baseline_mean"])
    assert st["estimate"] == pytest.approx(-0.5 * st["baseline_mean"], rel=1e-9)
    assert "metric refail_30 missing" in d["continuation"]["reason"]
    assert d["continuation"]["deciding_metric"] == "refail_30"
    assert "arm ghost has no rows" in d["ghost"]["reason"]


def test_holm_is_applied_across_candidates_and_success_metrics(decision):
    judged = [
        m
        for d in decision["verdicts"].values()
        if d["verdict"] != "untested"
        for m in d["metrics"].values()
        if m["role"] == "success"
    ]
    assert len(judged) == 6
    assert all(m["p_holm"] >= m["p_value"] for m in judged)
    # Exactly Holm over the six success tests of the judged candidates: one family.
    raw = [m["p_value"] for m in judged]
    assert [m["p_holm"] for m in judged] == pytest.approx(stats.holm(raw).tolist())
    smallest = min(judged, key=lambda m: m["p_value"])
    assert smallest["p_holm"] == pytest.approx(min(1.0, 6 * smallest["p_value"]))
    for d in decision["verdicts"].values():
        for m in d["metrics"].values():
            if m["role"] == "guardrail":
                assert m["p_holm"] is None


def test_stats_block_noise_floor_and_no_nan(decision):
    st = decision["stats"]
    assert (
        st["resamples"] == 2000
        and st["seed"] == 20261130
        and st["alpha"] == 0.025
        and st["unit"] == "session"
    )
    assert st["estimand"] == "mean of session means" and "sign-flip" in st["method"]
    assert st["interval"] == "95% session bootstrap-t, 2000 resamples, seed 20261130"
    assert st["printed_interval"] == "bootstrap-t"
    nf = decision["noise_floor"]
    assert set(nf) == {"tally_present", "constraints_kept", "summary_tokens"}
    assert all(v["exactly_zero"] and v["aa_estimate"] == 0 and v["ci"] == [0, 0] for v in nf.values())
    assert "exactly zero" in decision["noise_note"] and "deterministic" in decision["noise_note"]

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, float):
            assert math.isfinite(x)

    walk(decision)


def test_too_few_sessions_errors_and_degenerate_data_are_untested():
    rules = parse_rules(RULES, "test rules")
    few = decide(table(sessions=10, arms={"baseline": ARMS["baseline"], "win": ARMS["win"]}), rules)
    assert few["verdicts"]["win"]["verdict"] == "untested"
    assert "< min_sessions 20" in few["verdicts"]["win"]["reason"]

    df = table(arms={"baseline": ARMS["baseline"], "win": ARMS["win"]})
    hit = (df["arm"] == "win") & (df["metric"] == "tally_present")
    idx = df.index[hit][: int(hit.sum() * 0.2)]
    df.loc[idx, "value"] = np.nan
    df.loc[idx, "error"] = "scorer crashed"
    err = decide(df, rules)["verdicts"]["win"]
    assert (
        err["verdict"] == "untested"
        and "scorer errors" in err["reason"]
        and "> max_error_share 5%" in err["reason"]
    )
    assert err["metrics"]["tally_present"]["errors"] == len(idx)

    flat = table(arms={"baseline": ARMS["baseline"], "win": ARMS["win"]})
    flat.loc[flat["metric"] == "tally_present", "value"] = 1.0
    deg = decide(flat, rules)["verdicts"]["win"]
    assert (
        deg["verdict"] == "untested"
        and "no session differs" in deg["reason"]
        and "every value is 1 in both arms" in deg["reason"]
    )


def test_combination_candidates_claim_their_parts_evidence_and_unknown_ones_are_untested():
    raw = {**RULES, "candidates": {**RULES["candidates"], "other": {"success": ["summary_tokens"]}}}
    rules = parse_rules(raw, "test")
    combo = rules.for_candidate("win+other")
    assert combo.success == ("tally_present", "summary_tokens") and combo.guardrails == ("constraints_kept",)
    assert rules.for_candidate("win+nope") is None
    d = decide(table(arms={"baseline": ARMS["baseline"], "mystery": ARMS["win"]}), rules)
    assert d["verdicts"]["mystery"]["verdict"] == "untested"
    assert "no ship rule" in d["verdicts"]["mystery"]["reason"]


def test_rule_errors_name_the_source_and_key(tmp_path):
    with pytest.raises(RulesError, match=r"x\.toml: metrics\.m\.direction"):
        f = tmp_path / "x.toml"
        f.write_text('[metrics.m]\ndirection = "up"\n')
        read_rules_file(f)
    with pytest.raises(RulesError, match="unknown key"):
        parse_rules({"alpah": 0.05}, "s")
    with pytest.raises(RulesError, match=r"has no \[metrics\.zz\] rule"):
        parse_rules({"candidates": {"c": {"success": ["zz"]}}}, "s")
    with pytest.raises(RulesError, match="percentage"):
        parse_rules({"metrics": {"m": {"direction": "lower", "margin": "ten%"}}}, "s")


def test_default_rules_encode_each_seed_candidates_evidence():
    r = resolve_rules(None)
    assert "pyproject.toml" in r.source
    claims = {c: r.candidates[c].success for c in r.candidates}
    assert claims["head-tail"] == ("tally_present_left_view",)
    assert claims["carry-all"] == ("constraints_kept",)
    assert claims["bridge"] == ("refail_30", "redo_30")
    assert claims["no-stack"] == claims["digest-cap"] == ("growth",)
    assert (
        r.metrics["summary_tokens"].direction == "lower" and r.metrics["summary_tokens"].min_effect.relative
    )
    assert 1 - 2 * r.alpha == pytest.approx(0.95)


def test_deciding_a_run_of_sessions_at_a_time_gives_the_same_decision(tmp_path):
    """decide_run reads the metrics file in runs of whole sessions (evalkit.contracts.metrics_stream): the
    statistics and verdicts are the same bits as deciding the whole table at once."""
    import json

    from evalkit.contracts import aggregate
    from evalkit.contracts.metrics_stream import session_chunks, write_metrics
    from evalkit.decide.stage import decide_chunks, finite

    df = table(arms=ARMS)
    df.loc[df.index[::37], ["value", "error"]] = [math.nan, "scorer failed"]  # errors count the same way
    write_metrics(df, tmp_path / "m.parquet")
    rules = parse_rules(RULES, "test rules")
    cols = ["arm", "session", "event", "metric", "value", "error"]
    chunks = list(session_chunks(tmp_path / "m.parquet", cols, rows=200))
    assert len(chunks) >= 5 and sum(c.num_rows for c in chunks) == len(df)
    frames = [c.to_pandas() for c in chunks]
    assert all(not set(a["session"]) & set(b["session"]) for a, b in itertools.pairwise(frames))
    whole = decide(df, rules, list(ARMS))
    agg = aggregate.build(tmp_path / "m.parquet")
    parts = decide_chunks(frames, aggregate.pairs(agg), rules, list(ARMS), None, aggregate.zero_one(agg))
    assert json.dumps(finite(parts), sort_keys=True) == json.dumps(finite(whole), sort_keys=True)
    # the aggregate of the file (row group by row group) summarizes as the frame does at once
    chunked, one = aggregate.summary(agg), summarize_metrics(df)
    assert [{**r, "mean": None} for r in chunked] == [{**r, "mean": None} for r in one]
    assert np.allclose([r["mean"] for r in chunked], [r["mean"] for r in one], rtol=1e-12)
    assert any(r["errors"] for r in one)


def test_frames_whose_names_are_categoricals_decide_as_frames_of_text(tmp_path):
    """decide_run hands pairing its chunks with arm, session and metric dictionary-encoded (each
    name held once, not a string per row): the decision is the same to the last bit."""
    import json

    from evalkit.contracts import aggregate
    from evalkit.contracts.metrics_stream import session_chunks, write_metrics
    from evalkit.decide import stage
    from evalkit.decide.stage import decide_chunks, finite

    df = table(arms=ARMS)
    df.loc[df.index[::29], ["value", "error"]] = [math.nan, "scorer failed"]
    write_metrics(df, tmp_path / "m.parquet")
    rules = parse_rules(RULES, "test rules")
    cols = ["arm", "session", "event", "metric", "value", "error"]
    chunks = list(session_chunks(tmp_path / "m.parquet", cols, rows=300))
    coded = [stage._encoded(c).to_pandas() for c in chunks]
    assert all(
        isinstance(f[c].dtype, pd.CategoricalDtype) for f in coded for c in ("arm", "session", "metric")
    )
    agg = aggregate.build(tmp_path / "m.parquet")
    args = (aggregate.pairs(agg), rules, list(ARMS), None, aggregate.zero_one(agg))
    text = decide_chunks([c.to_pandas() for c in chunks], *args)
    assert json.dumps(finite(decide_chunks(coded, *args)), sort_keys=True) == json.dumps(
        finite(text), sort_keys=True
    )
    assert stage.CHUNK_ROWS <= 30_000  # what the stage holds of the table at once


def test_the_summary_counts_values_and_errors_per_arm_and_metric_across_frames():
    from evalkit.contracts import aggregate

    def rows(arm, metric, sessions, values, errors=()):
        out = [(arm, metric, s, v, None) for s, v in zip(sessions, values, strict=True)]
        return out + [(arm, metric, s, None, "boom") for s in errors]

    cols = ["arm", "metric", "session", "value", "error"]
    f1 = pd.DataFrame(rows("a", "m", ["s1", "s1", "s2"], [1.0, 0.0, 1.0], ["s2"]), columns=cols)
    f2 = pd.DataFrame(
        rows("a", "m", ["s3"], [float("nan")])
        + rows("b", "m", ["s3"], [0.5])
        + rows("b", "k", [], [], ["s3"]),
        columns=cols,
    )
    merged = aggregate.merge(aggregate.of_frame(f1), aggregate.of_frame(f2))
    got = {(d["arm"], d["metric"]): d for d in aggregate.summary(merged)}
    # a/m: s1's mean 0.5 and s2's 1.0; five rows, of which one error and one NaN count as errors
    assert got["a", "m"] == {"arm": "a", "metric": "m", "sessions": 2, "mean": 0.75, "values": 5, "errors": 2}
    assert got["b", "m"] == {"arm": "b", "metric": "m", "sessions": 1, "mean": 0.5, "values": 1, "errors": 0}
    assert ("b", "k") not in got  # no session has a value: no mean to report
