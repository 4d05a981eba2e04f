"""`evalkit calibrate`: null experiments from a run's own metrics table, and the simulation's table."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from evalkit.cli import main
from evalkit.contracts.metrics_stream import write_metrics
from evalkit.decide import simulate
from evalkit.report.data import load_report_data
from evalkit.report.sections.calibration import section_calibration
from tests.decide.test_verdicts import ARMS, RULES, table


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = tmp_path_factory.mktemp("cal") / "run"
    run.mkdir()
    arms = {k: ARMS[k] for k in ("baseline", "win", "noisy-guard")}
    df = table(sessions=40, arms=arms)
    same = df[df["arm"] == "baseline"].assign(arm="same")  # identical to the baseline in every session
    write_metrics(pd.concat([df, same], ignore_index=True), run / "metrics.parquet")
    rules = RULES | {"candidates": RULES["candidates"] | {"same": {"success": ["tally_present"]}}}
    cfg = {"config": {"rules": rules, "replay": {"arms": [*arms, "same"]}, "model": {"backend": "extractive"}}}
    (run / "config.json").write_text(json.dumps(cfg))
    args = ["calibrate", str(run), "--experiments", "200", "--resamples", "500", "--workers", "1", "--seed", "3"]
    assert main(args) == 0
    return run


def test_calibration_is_written_with_rates_in_range(run):
    cal = json.loads((run / "calibration.json").read_text())
    assert cal["experiments"] == 200 and cal["resamples"] == 500 and cal["seed"] == 3
    rows = {(r["candidate"], r["metric"]): r for r in cal["rows"]}
    win = rows[("win", "tally_present")]
    assert win["role"] == "success" and win["n_sessions"] == 40
    # 200 null experiments: a valid test's false rates stay well inside [0, 6%] (binomial 99.9%).
    for k in ("false_pass", "false_drop"):
        assert 0 <= win[k]["rate"] <= 0.06 and win[k]["experiments"] == 200
    # Power at the MDE the run reports is about the configured 0.8.
    assert 0.65 <= win["power"]["rate"] <= 0.93 and win["expected_power"] == 0.8
    assert win["power_at"] > 0.05  # the reported MDE lies beyond the min effect
    same = rows[("same", "tally_present")]
    assert same["false_pass"] is None and "no session differs" in same["note"]
    assert (run / "calibration.md").read_text().startswith("Null experiments")


def test_report_shows_the_calibration_beside_the_verdicts(run, tmp_path):
    lines = section_calibration(load_report_data(run), tmp_path)
    text = "\n".join(lines)
    assert "**tally_present**" in text and "| win | success | 40 |" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "evalkit calibrate" in section_calibration(load_report_data(empty), tmp_path)[0]


@pytest.mark.slow
def test_simulation_table_renders_every_kind_of_cell():
    cells = simulate.simulate(experiments=20, resamples=200, workers=1, progress=False)
    questions = {c.question for c in cells}
    assert {"A/A false ship (min effect 0)", "A/A coverage", "power at 1× the reported MDE"} <= questions
    assert any(q.startswith("sparse A/A false ship (k = 3") for q in questions)
    assert "guardrail at its margin declared non-inferior" in questions
    md = simulate.table(cells)
    assert md.count("\n") == len(cells) + 2 and all(0 <= c.rate <= 1 for c in cells)
    assert simulate.true_difference("lognormal", 0.1) == pytest.approx(0.1 * np.exp(0.125 + 0.5))
    assert simulate.true_difference("binary-0.2", simulate.effect_for("binary-0.2", 0.05)) == pytest.approx(0.05)


def test_aa_coverage_row_is_the_printed_t_interval_and_the_sign_flip_one_is_information():
    """Binary p ≈ 0.9 at n = 10: most A/A experiments have ≤ 5 differing sessions, where the inverted
    sign-flip interval cannot exclude 0 (2^−5 > α) and over-covers; the printed t interval is the row
    with the 93–97% target, and it covers less often."""
    rows = {r["question"]: r for r in simulate._job(("aa", "binary-0.9", 10, 200, 3, 0.025, 0.8, 1000))}
    printed = rows["A/A coverage"]
    flip = rows["A/A coverage (inverted sign-flip interval, not printed)"]
    assert printed["target"] == "93–97%" and flip["target"] == "none (information)"
    assert printed["experiments"] == flip["experiments"] == 200
    assert printed["hits"] < flip["hits"]
