"""Item 10 of issue 19 (revised by issue 39): unparseable judge replies replay as errors; the
reproduce command is shell-quoted and escaped; evidence links of external arms resolve; `facts` escapes control
characters; re-scoring, re-reporting and resuming an unchanged run send no request (README)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from evalkit.corpus import read_sessions, write_sessions
from evalkit.testing.serverlog import read_log
from tests.conftest import ROOT
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, verdict_script, write_experiment

SCRIPT = ROOT / "tests" / "support" / "external_compactor.py"


def _posts(log: Path) -> int:
    return sum(e["method"] == "POST" for e in read_log(log))


def _judge_errors(run: Path) -> int:
    import pandas as pd

    m = pd.read_parquet(run / "metrics.parquet")
    judged = m[m.metric.str.startswith("judge")]
    return int(judged.error.notna().sum())


@pytest.mark.slow
def test_unparseable_verdicts_stay_errors_and_reruns_send_nothing(tmp_path, fake_server_process):
    """Issue 39 trap 6: an unchanged rerun re-sent every judge call whose reply had not parsed.
    The reply is what the endpoint answered: it stays cached and replays as the same error."""
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": "expected_facts", "reply": "The answer looks fine to me."}]))
    url, log = fake_server_process("--script", str(rules), "--no-bodies")
    corpus = tiny_corpus(tmp_path / "corpus")
    exp = write_experiment(
        tmp_path / "exp.toml", corpus, model={"backend": "openai", "model": "m", "base_url": url}
    )
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(run / "model-calls.sqlite") as con:
        purposes = dict(con.execute("SELECT purpose, COUNT(*) FROM calls GROUP BY purpose").fetchall())
    assert purposes.get("answer", 0) > 0 and purposes.get("summarize", 0) > 0
    assert purposes.get("judge", 0) > 0, purposes  # the unparseable verdicts are kept...
    errors = _judge_errors(run)
    assert errors > 0  # ...and scored as errors, never as grades
    assert "are errors, above 5%" in done.stderr  # a failing judge is a warning a person sees
    n = _posts(log)
    for args in (["score", str(run)], ["run", "--config", str(exp), "--run-dir", str(run)]):
        done = run_cli(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert _posts(log) == n, args  # nothing asked again
    assert _judge_errors(run) == errors

    # ...while with parseable verdicts, re-scoring, re-reporting and resuming send nothing.
    url2, log2 = fake_server_process("--script", str(verdict_script(tmp_path)), "--no-bodies")
    exp2 = write_experiment(
        tmp_path / "exp2.toml", corpus, model={"backend": "openai", "model": "m", "base_url": url2}
    )
    run2 = tmp_path / "run2"
    assert run_cli("run", "--config", str(exp2), "--run-dir", str(run2)).returncode == 0
    n = _posts(log2)
    assert n > 0
    for args in (
        ["score", str(run2)],
        ["report", str(run2)],
        ["run", "--config", str(exp2), "--run-dir", str(run2), "--resume"],
    ):
        done = run_cli(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert _posts(log2) == n, args


def test_reproduce_command_and_external_evidence_links(tmp_path):
    corpus = tiny_corpus(tmp_path / "corpus", n=3)
    arm = f"external:{sys.executable} {SCRIPT} ok\n<b>injected</b>"
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--arms", f"baseline,{arm}")
    assert done.returncode == 0, done.stderr
    command = json.loads((run / "config.json").read_text())["command"]
    assert "\n" not in command
    back = subprocess.run(
        ["bash", "-c", f"{sys.executable} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' {command}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(back.stdout)[-1] == f"baseline,{arm}"  # the shell gets the arguments back
    report_dir = run / "report"
    md = (report_dir / "report.md").read_text()
    # HTML inside a code block or span is shown as text; outside them it must be escaped.
    outside_code = re.sub(r"(?s)^(`{3,})[^\n]*\n.*?\n\1$", "", md, flags=re.M)
    outside_code = re.sub(r"(`+).*?\1", "", outside_code)
    assert "<b>" not in outside_code
    # The external arm's evidence is listed (its sessions link into `evalkit view` once the viewer
    # exists), and every relative link the report has resolves.
    assert "Evidence per candidate" in md and "external:" in md
    links = [x for x in re.findall(r"\]\(([^)#?]+)[^)]*\)", md) if "://" not in x]
    assert links
    for link in links:
        assert (report_dir / link).resolve().exists(), link


def test_facts_prints_control_characters_escaped(tmp_path):
    src = tiny_corpus(tmp_path / "corpus", n=1)
    s = next(iter(read_sessions(src)))
    evil = tmp_path / "evil.jsonl"
    write_sessions(evil, [replace(s, id="sess\x1b[31mRED\x1b]0;title\x07")])
    done = run_cli("facts", str(evil))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout
    assert "sess\\x1b[31mRED" in done.stdout
