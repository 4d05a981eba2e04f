"""Issue 39 leftovers: runs through ``--executor`` and ``evalkit merge`` write ``warnings.json`` as a
plain run does (the report's "Read these first" shows them), and a rules-only re-decide does not
leave an old ``calibration.json`` in place as if it described the new verdicts. Real processes,
offline, two tiny sessions."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, write_experiment

pytestmark = pytest.mark.slow


def test_executor_and_merge_runs_write_warnings_json(tmp_path):
    corpus = tiny_corpus(tmp_path / "corpus", n=2)
    with corpus.open("a") as fh:  # a damaged record: skipped, and a warning every run must show
        fh.write('{"id": "broken", "messages": [\n')
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--executor", "local", "--shards", "2", "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    body = json.loads((run / "warnings.json").read_text())
    assert [w["kind"] for w in body["warnings"]] == ["skipped_sessions"], body
    assert "warnings: 1" in done.stderr and "1 session record(s) skipped" in done.stderr
    report = (run / "report" / "report.md").read_text()
    first = report[report.index("## Read these first") + 3 :]
    assert "1 session record(s) skipped" in first[: first.index("\n## ")], report[:3000]
    shards = sorted((run / "shards").iterdir())
    merged = tmp_path / "merged"
    again = run_cli("merge", *map(str, shards), "--out", str(merged))
    assert again.returncode == 0, again.stderr
    assert json.loads((merged / "warnings.json").read_text()) == body
    assert "1 session record(s) skipped" in again.stderr


def test_a_rules_only_redecide_drops_a_calibration_made_for_other_rules(tmp_path):
    corpus = tiny_corpus(tmp_path / "corpus", n=2)
    exp = write_experiment(tmp_path / "exp.toml", corpus, rules={"min_sessions": 2})
    run = tmp_path / "run"
    assert run_cli("run", "--config", str(exp), "--run-dir", str(run)).returncode == 0
    # A calibration of an earlier version, for the rules of then (no record of which).
    old = {"run": str(run), "experiments": 7, "resamples": 13, "seed": 424242, "alpha": 0.025, "rows": []}
    (run / "calibration.json").write_text(json.dumps(old))
    (run / "calibration.md").write_text("old calibration, seed 424242\n")
    exp.write_text(exp.read_text().replace("min_sessions = 2", "min_sessions = 3"))
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--resume")
    assert done.returncode == 0, done.stderr
    assert json.loads((run / "decision.json").read_text())["stats"]["min_sessions"] == 3
    assert not (run / "calibration.json").exists() and not (run / "calibration.md").exists()
    assert "calibration.json was computed for other rules: removed" in done.stderr
    assert "424242" not in (run / "report" / "report.md").read_text()
