"""`evalkit gate`: every exit code, the three outputs written before exiting, empty and partial results."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from evalkit.cli import main
from evalkit.contracts.exit_codes import EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE
from evalkit.contracts.metrics_stream import write_metrics
from tests.decide.test_verdicts import ARMS, table

RULES_TOML = """
alpha = 0.025
resamples = 1000
min_sessions = 20
guardrails = ["constraints_kept"]
[metrics]
tally_present = { direction = "higher", min_effect = 0.05, margin = 0.02 }
constraints_kept = { direction = "higher", min_effect = 0.05, margin = 0.02 }
refail_30 = { direction = "lower", min_effect = 0.02, margin = 0.02 }
[candidates]
win = { success = ["tally_present"] }
lose = { success = ["tally_present"] }
flat = { success = ["tally_present"] }
needs-continuation = { success = ["refail_30"] }
"""


@pytest.fixture
def make_run(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES_TOML)

    def make(arms: dict, configured: list[str] | None = None, name: str = "run"):
        run = tmp_path / name
        run.mkdir()
        write_metrics(table(arms=arms), run / "metrics.parquet")
        if configured is not None:
            (run / "config.json").write_text(json.dumps({"config": {"replay": {"arms": configured}}}))
        return run

    return make, str(rules)


def gate(run, rules, *extra):
    return main(["gate", str(run), "--rules", rules, *extra])


def outputs(run):
    d = run / "gate"
    return json.loads((d / "gate.json").read_text()), (d / "gate.md").read_text(), ET.parse(d / "junit.xml").getroot()


def test_pass_writes_json_markdown_and_junit(make_run, tmp_path, monkeypatch, capsys):
    make, rules = make_run
    run = make({"baseline": ARMS["baseline"], "win": ARMS["win"]}, ["baseline", "win"])
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert gate(run, rules, "--require", "win=ship") == EXIT_OK
    doc, md, junit = outputs(run)
    assert doc["gate"]["passed"] is True and doc["gate"]["exit_code"] == 0
    assert doc["decision"]["verdicts"]["win"]["verdict"] == "ship"
    assert (run / "gate" / "gate.json").read_text() == json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert "PASSED (exit 0)" in md and "| win | **ship** | ok |" in md
    assert [tc.get("name") for tc in junit.iter("testcase")] == ["win"] and junit.get("failures") == "0"
    assert summary.read_text().startswith("earlier step\n## evalkit gate: PASSED")
    assert "PASSED" in capsys.readouterr().out


def test_drop_fails_the_gate_and_the_outputs_agree(make_run):
    make, rules = make_run
    run = make({"baseline": ARMS["baseline"], "win": ARMS["win"], "lose": ARMS["lose"]})
    assert gate(run, rules) == EXIT_GATE_FAILED
    doc, md, junit = outputs(run)
    assert doc["gate"]["exit_code"] == 1 and doc["decision"]["verdicts"]["lose"]["verdict"] == "drop"
    assert "FAILED (exit 1)" in md and "lose: verdict drop is in --fail-on" in md
    cases = {tc.get("name"): tc for tc in junit.iter("testcase")}
    assert set(cases) == {"win", "lose"} and cases["lose"].find("failure") is not None
    assert cases["win"].find("failure") is None and junit.get("failures") == "1"
    # the same run passes when drops are tolerated, and fails when a requirement is not met
    assert gate(run, rules, "--fail-on", "none") == EXIT_OK
    assert gate(run, rules, "--fail-on", "none", "--require", "lose=ship") == EXIT_GATE_FAILED
    assert gate(run, rules, "--fail-on", "none", "--require", "lose=drop|inconclusive") == EXIT_OK


def test_inconclusive_passes_by_default_and_fails_on_request(make_run):
    make, rules = make_run
    run = make({"baseline": ARMS["baseline"], "flat": ARMS["flat"]})
    assert gate(run, rules) == EXIT_OK
    assert gate(run, rules, "--fail-on", "drop,inconclusive,untested") == EXIT_GATE_FAILED


def test_missing_metric_makes_the_candidate_untested_and_fails(make_run):
    make, rules = make_run
    run = make({"baseline": ARMS["baseline"], "needs-continuation": ARMS["flat"]})
    assert gate(run, rules) == EXIT_GATE_FAILED
    doc, _, junit = outputs(run)
    v = doc["decision"]["verdicts"]["needs-continuation"]
    assert v["verdict"] == "untested" and "refail_30 missing" in v["reason"]
    # not failing on untested still reports it as skipped in JUnit
    assert gate(run, rules, "--fail-on", "drop") == EXIT_OK
    _, _, junit = outputs(run)
    assert junit.find("testcase").find("skipped") is not None


def test_empty_and_partial_results_never_pass(make_run):
    make, rules = make_run
    only_baseline = make({"baseline": ARMS["baseline"]}, name="empty")
    assert gate(only_baseline, rules, "--fail-on", "none") == EXIT_GATE_FAILED
    doc, md, junit = outputs(only_baseline)
    assert "empty result set" in doc["gate"]["failures"][0] and "empty result set" in md
    assert [tc.get("name") for tc in junit.iter("testcase")] == ["(result set)"]

    partial = make({"baseline": ARMS["baseline"], "win": ARMS["win"]}, ["baseline", "win", "lose"], name="partial")
    assert gate(partial, rules, "--fail-on", "none") == EXIT_GATE_FAILED
    doc, _, _ = outputs(partial)
    assert "partial result set: configured arm lose has no rows" in doc["gate"]["failures"]

    no_base = make({"win": ARMS["win"]}, name="nobase")
    assert gate(no_base, rules, "--fail-on", "none") == EXIT_GATE_FAILED

    zero_rows = make({}, ["baseline", "win"], name="zero")
    assert gate(zero_rows, rules, "--fail-on", "none") == EXIT_GATE_FAILED
    assert outputs(zero_rows)[0]["decision"]["verdicts"]["win"]["verdict"] == "untested"

    assert gate(partial, rules, "--fail-on", "none", "--require", "absent=ship") == EXIT_GATE_FAILED


def test_usage_and_data_errors_exit_2(make_run, tmp_path, capsys):
    make, rules = make_run
    run = make({"baseline": ARMS["baseline"], "win": ARMS["win"]})
    assert gate(tmp_path / "nowhere", rules) == EXIT_USAGE
    assert gate(run, rules, "--fail-on", "drop,sometimes") == EXIT_USAGE
    assert gate(run, rules, "--require", "win") == EXIT_USAGE
    assert gate(run, str(tmp_path / "missing.toml")) == EXIT_USAGE
    bad = tmp_path / "bad.toml"
    bad.write_text("alpha = 'high'\n")
    assert gate(run, str(bad)) == EXIT_USAGE
    assert "bad.toml: alpha: 'high': Input should be a valid number" in capsys.readouterr().err
    (run / "metrics.parquet").write_bytes(b"not parquet")
    assert gate(run, rules) == EXIT_USAGE
    assert "cannot read the metrics table" in capsys.readouterr().err
