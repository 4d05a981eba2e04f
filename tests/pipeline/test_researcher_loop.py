"""Issue 39 (the researcher's loop) and issue 41 item 1: results that know what made them, rules
that inherit, and decide settings that never touch the earlier stages. Each test names the trap
it closes; each failed on 1656aa3."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from evalkit.testing.serverlog import read_log
from tests.support.cli import run_cli
from tests.support.runs import evalkit, tiny_corpus, verdict_script, write_experiment


def _posts(log: Path) -> int:
    return sum(e["method"] == "POST" for e in read_log(log))


def _plugin(folder: Path, prompt: str) -> Path:
    """An installed-looking candidate plugin (an entry point in a dist-info folder on PYTHONPATH)."""
    folder.mkdir(exist_ok=True)
    (folder / "myarm.py").write_text(
        "from dataclasses import replace\n\n"
        f"PROMPT = {prompt!r}\n\n\n"
        "def my_arm(p):\n"
        '    """adds one instruction to the summarizer"""\n'
        "    return replace(p, instructions=(*p.instructions, PROMPT))\n"
    )
    info = folder / "myarm-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myarm\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[evalkit.candidate]\nmy-arm = myarm:my_arm\n")
    return folder


def test_trap1_an_edited_plugin_prompt_is_replayed_again_on_resume(tmp_path):
    """Trap 1: after the plugin's prompt changed, `run --resume` said "replay is complete" and
    scored the old summaries."""
    plug = _plugin(tmp_path / "plug", "Keep every test tally.")
    env = {"PYTHONPATH": os.pathsep.join([str(plug), os.environ.get("PYTHONPATH", "")])}
    corpus = tiny_corpus(tmp_path / "corpus", n=1)
    exp = write_experiment(tmp_path / "exp.toml", corpus, replay={"arms": ["baseline", "my-arm"]})
    run = tmp_path / "run"
    first = evalkit("run", "--config", str(exp), "--run-dir", str(run), env=env)
    assert first.returncode == 0, first.stderr
    marker = json.loads((run / ".done" / "replay.json").read_text())
    before = marker["inputs"]["arms"]
    _plugin(plug, "Keep every test tally and every file path.")
    again = evalkit("run", "--config", str(exp), "--run-dir", str(run), "--resume", env=env)
    assert again.returncode == 0, again.stderr
    assert "resume: corpus is complete, skipped" in again.stderr
    assert "resume: replay runs again: inputs changed (arms: my-arm)" in again.stderr
    after = json.loads((run / ".done" / "replay.json").read_text())["inputs"]["arms"]
    assert after["baseline"] == before["baseline"] and after["my-arm"] != before["my-arm"]


def test_trap1_41_1_another_config_into_a_used_folder_is_refused_not_mixed(tmp_path):
    """Issue 41 item 1: `run --config A --run-dir D; run --config B --run-dir D` (B: continuation
    off, another seed) left two run ids in one metrics table, stale events of arms B does not
    run, and exit 0."""
    corpus = tiny_corpus(tmp_path / "corpus", n=1)
    a = write_experiment(
        tmp_path / "a.toml",
        corpus,
        replay={"arms": ["baseline", "head-tail", "masking"]},
        continuation={"enabled": True},
    )
    b = write_experiment(tmp_path / "b.toml", corpus, replay={"arms": ["baseline", "head-tail"]})
    b.write_text(b.read_text().replace("seed = 7", "seed = 8"))
    run = tmp_path / "D"
    assert run_cli("run", "--config", str(a), "--run-dir", str(run)).returncode == 0
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.suffix != ".lock"}
    done = run_cli("run", "--config", str(b), "--run-dir", str(run))
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and str(run) in line
    assert "seed 7 → 8" in line and "continuation.enabled true → false" in line
    assert "another --run-dir" in line
    assert pd.read_parquet(run / "metrics.parquet").run.nunique() == 1
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.suffix != ".lock"}
    assert after == before  # nothing of B was written
    # a new folder is the way out
    assert run_cli("run", "--config", str(b), "--run-dir", str(tmp_path / "E")).returncode == 0


def test_trap2_experiment_rules_extend_the_project_rules(tmp_path):
    """Trap 2: an experiment's own [rules] replaced the project's, guardrails included."""
    from evalkit.contracts.config import RulesConfig
    from evalkit.decide.rules import resolve_rules

    own = {"candidates": {"short": {"success": ["summary_tokens"]}}, "min_sessions": 5}
    rules = resolve_rules(RulesConfig(**own), tmp_path)
    assert rules.min_sessions == 5
    assert "tally_present" in rules.for_candidate("short").guardrails
    assert "constraints_kept" in rules.guardrails and "masking" in rules.candidates
    alone = resolve_rules(
        RulesConfig(
            **own, inherit=False, metrics={"summary_tokens": {"direction": "lower", "min_effect": 1}}
        ),
        tmp_path,
    )
    assert alone.for_candidate("short").guardrails == () and "masking" not in alone.candidates


def test_trap2_a_candidate_without_guardrails_cannot_ship():
    """Trap 2: with no guardrail a clearly better candidate shipped, "no guardrails" the only hint."""
    from evalkit.decide.rules import parse_rules
    from evalkit.decide.stage import decide

    rows = []
    for s in range(30):
        for arm, v in (("baseline", 0.2), ("cand", 0.8 + (s % 3) * 0.01)):
            rows.append(
                {
                    "run": "r",
                    "arm": arm,
                    "session": f"s{s}",
                    "event": 0,
                    "round": 1,
                    "replicate": 0,
                    "metric": "tally_present",
                    "value": v,
                    "error": None,
                }
            )
    rules = parse_rules(
        {
            "min_sessions": 5,
            "metrics": {"tally_present": {"direction": "higher", "min_effect": 0.05, "margin": 0.02}},
            "candidates": {"cand": {"success": ["tally_present"]}},
        },
        "test",
    )
    v = decide(pd.DataFrame(rows), rules, ["baseline", "cand"])["verdicts"]["cand"]
    assert v["verdict"] == "untested"
    assert "no guardrail" in v["reason"] and "tally_present" in v["reason"]


@pytest.mark.parametrize(
    "rules, named",
    [
        ({"candidates": {"hed-tail": {"success": ["tally_present"]}}}, "candidates.hed-tail"),
        ({"guardrails": ["tally_presnt"]}, "tally_presnt"),
    ],
)
def test_trap2_unknown_names_in_rules_fail_before_any_work(tmp_path, rules, named):
    """Trap 2/6: a misspelled candidate was accepted silently; a rules typo surfaced only after
    every model call."""
    corpus = tiny_corpus(tmp_path / "corpus", n=1)
    exp = write_experiment(tmp_path / "exp.toml", corpus, rules=rules)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (run / "corpus").exists() and not (run / "events").exists()


@pytest.mark.slow
def test_trap3_a_decide_setting_redecides_the_same_folder_with_no_request(tmp_path, fake_server_process):
    """Trap 6: changing only min_sessions made a new run folder with an empty cache and re-sent
    every call; with --resume it was refused as another config."""
    url, log = fake_server_process("--script", str(verdict_script(tmp_path)), "--no-bodies")
    corpus = tiny_corpus(tmp_path / "corpus", n=2)
    model = {"backend": "openai", "model": "m", "base_url": url}
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model, rules={"min_sessions": 2})
    first = run_cli("run", "--config", str(exp))
    assert first.returncode == 0, first.stderr
    (run,) = (tmp_path / "runs").iterdir()
    # trap 5: the endpoint used is recorded in the run, the report and the summary
    (ep,) = json.loads((run / "config.json").read_text())["endpoints"]
    assert (ep["url"], ep["source"], ep["local"]) == (url.rstrip("/"), "config", True)
    assert f"endpoint: model: {url.rstrip('/')} (config)" in first.stderr
    assert url.rstrip("/") in (run / "report" / "report.md").read_text()
    sent = _posts(log)
    assert sent > 0
    exp.write_text(exp.read_text().replace("min_sessions = 2", "min_sessions = 3"))
    again = run_cli("run", "--config", str(exp))  # no --run-dir: the default folder
    assert again.returncode == 0, again.stderr
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run.name]
    assert _posts(log) == sent
    assert json.loads((run / "decision.json").read_text())["stats"]["min_sessions"] == 3
    exp.write_text(exp.read_text().replace("min_sessions = 3", "min_sessions = 4"))
    resumed = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    for stage in ("corpus", "replay", "score"):
        assert f"resume: {stage} is complete, skipped" in resumed.stderr
    assert _posts(log) == sent
    assert json.loads((run / "decision.json").read_text())["stats"]["min_sessions"] == 4


@pytest.mark.parametrize("url", ["htpp://127.0.0.1:9/v1", "127.0.0.1:9/v1", "http:///v1"])
def test_trap5_an_endpoint_typo_fails_at_once(tmp_path, url):
    """Trap 5: `htpp://…` or a URL without a scheme ran silent for more than 5 minutes."""
    corpus = tiny_corpus(tmp_path / "corpus", n=1)
    exp = write_experiment(
        tmp_path / "exp.toml", corpus, model={"backend": "openai", "model": "m", "base_url": url}
    )
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 2, done.stderr
    assert "base_url" in done.stderr and ("scheme" in done.stderr or "no host" in done.stderr)
    assert not run.exists()


def test_trap5_the_public_default_endpoint_needs_allow_remote(tmp_path):
    """Trap 5: with no base_url and no OPENAI_BASE_URL the sessions went to the public API."""
    corpus = tiny_corpus(tmp_path / "corpus", n=1)
    exp = write_experiment(tmp_path / "exp.toml", corpus, model={"backend": "openai", "model": "m"})
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), env={"OPENAI_BASE_URL": ""})
    assert done.returncode == 2, done.stderr
    assert "--allow-remote" in done.stderr and "api.openai.com" in done.stderr
    assert not run.exists()


def test_trap4_7_warnings_a_person_sees_and_strict(tmp_path):
    """Traps 4 and 7: sessions that never reach the window replayed 0 events with no warning; a
    corrupted session file dropped a session with exit 0 and no word."""
    corpus = tiny_corpus(tmp_path / "corpus", n=2)
    with open(corpus, "a") as fh:
        fh.write('{"id": "broken", "messages": [\n')
    exp = write_experiment(
        tmp_path / "exp.toml", corpus, replay={"window": 200_000, "reserve": 16_384, "keep_recent": 20_000}
    )
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    # nothing compacted: nothing to judge, the gate's code for an empty result (issue 38)
    assert done.returncode == 1, done.stderr
    assert "warnings: 2" in done.stderr
    assert "no compaction events for arm(s) baseline, head-tail" in done.stderr
    assert 'trigger = "messages"' in done.stderr and "1 session record(s) skipped" in done.stderr
    assert "endpoint: none" in done.stderr
    report = (run / "report" / "report.md").read_text()
    first = report.split("## Read these first")[1].split("\n## ")[0]
    assert "no compaction events" in first and "endpoint: none" in first
    assert "no compaction events" in report and "skipped while reading the corpus" in report
    strict = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--strict")
    assert strict.returncode == 2 and "--strict: 2 warning(s)" in strict.stderr
