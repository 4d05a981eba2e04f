"""The README's "Compare your own prompt", end to end (issue 39): import a folder of real sessions
with `evalkit init`, define a prompt variant in the experiment file only, run offline and against
the fake server, read the verdict, gate it. Three real sessions, a messages trigger."""

from __future__ import annotations

import json
import tomllib

import pytest

from evalkit.testing.serverlog import read_log
from tests.support.cli import run_cli
from tests.support.runs import starter_experiment, verdict_script

FOLDER = "claude-code/d-kimuson-claude-code-viewer"  # 3 sessions of 21-25 messages


@pytest.mark.slow
def test_compare_your_own_prompt(tmp_path, transcripts, fake_server_process):
    work = tmp_path / "work"
    # 1. a starter experiment: the sessions imported, the trigger chosen from their sizes
    exp = starter_experiment(transcripts, FOLDER, work)
    cfg = tomllib.loads(exp.read_text())
    assert cfg["replay"]["trigger"] == "messages" and cfg["replay"]["max_messages"] == 11
    assert (work / "corpus" / "sessions.jsonl").is_file()

    # 2. the prompt variant, in the experiment file only
    text = exp.read_text().replace(
        'instructions_add = ["Target about 300 words',
        'instructions_add = ["Name every file you changed.", "Target about 300 words',
    )
    exp.write_text(text)

    # 3. offline
    offline = run_cli("run", "--config", str(exp), "--run-dir", str(tmp_path / "offline"))
    assert offline.returncode == 0, offline.stderr
    assert "no compaction events" not in offline.stderr
    decision = json.loads((tmp_path / "offline" / "decision.json").read_text())
    assert "my-prompt" in decision["verdicts"]

    # 4. against the fake server (an OpenAI-compatible endpoint)
    url, log = fake_server_process("--script", str(verdict_script(tmp_path)), "--no-bodies")
    exp.write_text(
        exp.read_text()
        .replace("# [model]", "[model]")
        .replace('# backend = "openai"', 'backend = "openai"')
        .replace('# model = "your-model"', 'model = "your-model"')
        .replace('# base_url = "http://localhost:8000/v1"', f'base_url = "{url}"')
    )
    run = tmp_path / "real"
    real = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert real.returncode == 0, real.stderr
    sent = sum(e["method"] == "POST" for e in read_log(log))
    assert sent > 0 and f"endpoint: model: {url}" in real.stderr

    # 5. the verdict, with the project's guardrails inherited
    v = json.loads((run / "decision.json").read_text())["verdicts"]["my-prompt"]
    report = (run / "report" / "report.md").read_text()
    assert "my-prompt" in report and v["verdict"] in report
    # 3 sessions with no test tally: too few, and a guardrail with nothing to measure
    assert v["verdict"] == "untested" and ("min_sessions" in v["reason"] or "missing" in v["reason"])

    # 6. the gate: untested fails by default; a rerun sends nothing
    gate = run_cli("gate", str(run), "--require", "my-prompt=ship")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    again = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert again.returncode == 0, again.stderr
    assert sum(e["method"] == "POST" for e in read_log(log)) == sent
