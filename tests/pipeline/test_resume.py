"""Item 7 of issue 19: --resume checks each stage's completion marker (counts and hashes of its
inputs and outputs) and runs again what does not match."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from tests.conftest import ROOT
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, write_experiment

SCRIPT = ROOT / "tests" / "support" / "external_compactor.py"


def _run(exp, run, *extra):
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), *extra)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
def test_resume_reruns_a_truncated_corpus_and_what_follows(tmp_path):
    corpus = tiny_corpus(tmp_path / "src", n=3)
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    run = tmp_path / "run"
    _run(exp, run)
    sessions = run / "corpus" / "sessions.jsonl"
    full = sessions.read_text()
    sessions.write_text(full.splitlines(keepends=True)[0])  # a kill mid-write, a disk filling up
    done = _run(exp, run, "--resume")
    assert sessions.read_text() == full
    assert "resume: corpus runs again" in done.stderr
    ev = pd.read_json(run / "events" / "baseline.jsonl", lines=True)
    assert ev.session.nunique() == 3
    assert json.loads((run / "corpus" / "manifest.json").read_text())["stats"]["sessions"] == 3
    # Nothing changed since: every stage is skipped.
    again = _run(exp, run, "--resume")
    for stage in ("corpus", "replay", "score"):
        assert f"resume: {stage} is complete, skipped" in again.stderr


@pytest.mark.slow
def test_resume_with_an_external_arm_keeps_metrics_matching_events(tmp_path):
    corpus = tiny_corpus(tmp_path / "src", n=2)
    arm = f"external:{sys.executable} {SCRIPT}"
    exp = write_experiment(tmp_path / "exp.toml", corpus, replay={"arms": ["baseline", arm]})
    run = tmp_path / "run"
    _run(exp, run)
    done = _run(exp, run, "--resume")
    assert (
        "resume: replay is complete, skipped" in done.stderr
        and "resume: score is complete, skipped" in done.stderr
    )
    # An events file changed behind the run's back (another replay, an edit): re-scored.
    ext = next(p for p in (run / "events").glob("*.jsonl") if "external" in p.name)
    lines = ext.read_text().splitlines(keepends=True)
    ext.write_text("".join(lines[:-1]))
    done = _run(exp, run, "--resume")
    assert "resume: replay runs again" in done.stderr and "resume: score runs again" not in done.stderr
    m = pd.read_parquet(run / "metrics.parquet")
    ev = pd.concat([pd.read_json(p, lines=True) for p in (run / "events").glob("*.jsonl")])
    assert set(zip(m[m.event >= 0].arm, m[m.event >= 0].session, m[m.event >= 0].event, strict=True)) == set(
        zip(ev.arm, ev.session, ev.event, strict=True)
    )
