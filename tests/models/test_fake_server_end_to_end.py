"""End to end against the fake server (a real HTTP server in a subprocess, the real openai SDK):
a replay under every fault, the second run and the replay backend making no HTTP request, a run
killed with SIGKILL and rerun, and the API key never written anywhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from evalkit.common.registry import Entry
from evalkit.contracts.config import ModelConfig, ReplayConfig
from evalkit.models.completion import is_refusal
from evalkit.replay import ARMS, replay_corpus
from evalkit.replay.cut import cut_keep_recent
from evalkit.testing.faults import FAULTS, REFUSAL_TEXT
from evalkit.testing.serverlog import answered, read_log, settled_log
from tests.conftest import ROOT
from tests.support.cli import run_cli
from tests.support.runs import cache_keys, evalkit_cmd, tiny_corpus

SECRET = "sk-evalkit-test-SECRET-0123456789"
# Faults the client retries; a cut-off answer ("length") is an error, not retried (test_truncated.py).
RETRIED = tuple(f for f in FAULTS if f != "length")
REPLAY = {"window": 40_000, "reserve": 4_000, "keep_recent": 5_000, "workers": 2}


def _twin(policy):
    """The baseline compactor under another name: identical summarizer input, so every one of
    its calls must be answered by the baseline arm's call (cache or single-flight), never re-sent."""
    return policy


def _short_tail(policy):
    """The baseline with a shorter kept tail: different input, so its own calls."""
    return replace(
        policy,
        cut=lambda job: cut_keep_recent(replace(job, settings=replace(job.settings, keep_recent=3_000))),
    )


def _register_test_arms(monkeypatch) -> list[str]:
    # Test-only arms, registered for this test alone (monkeypatch removes them afterwards, so the
    # registry other tests list is untouched). Workers are forked, so they inherit them.
    for name, fn in (("test-twin", _twin), ("test-short-tail", _short_tail)):
        monkeypatch.setitem(ARMS._entries, name, Entry(name, fn, f"test-only: {fn.__doc__.split(':')[0]}"))
    return ["baseline", "test-twin", "test-short-tail"]


def _prefix_corpus(out: Path, n: int, tokens: int = 110_000) -> Path:
    """``n`` synthetic sessions cut (at a turn boundary, tool pairs intact) after ~``tokens``
    tokens, so each compacts a few times at the small test window instead of twenty."""
    tiny_corpus(out, n, tokens)
    return out


def _events(run_dir: Path, arm: str) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "events" / f"{arm}.jsonl").read_text().splitlines()]


def _assert_secret_absent(*paths: Path, texts: tuple[str, ...] = ()):
    for root in paths:
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for f in files:
            assert SECRET.encode() not in f.read_bytes(), f"API key written to {f}"
    for t in texts:
        assert SECRET not in t


@pytest.mark.slow
def test_replay_under_every_fault_then_rerun_and_replay_offline(tmp_path, fake_server_process, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    url, log_path = fake_server_process(
        *[a for f in RETRIED for a in ("--fault", f"{f}=0.1")],
        *("--fault-latency", "0.05", "--retry-after", "0.01", "--hang", "1.0", "--no-bodies"),
    )
    arms = _register_test_arms(monkeypatch)
    corpus = _prefix_corpus(tmp_path / "corpus", 20)
    model = ModelConfig(
        **{
            "backend": "openai",
            "model": "fake-model",
            "base_url": url,
            "timeout": 0.5,  # well above a loaded machine's normal answer time, below the 1.0 s hang
            # With 70% of attempts failing (and a loaded machine adding timeouts), 40 retries leave no request
            # without an answer (0.7**41 ≈ 4e-7 each; the error path is tested in test_models.py).
            "max_retries": 40,
            "backoff_base": 0.005,
            "backoff_max": 0.02,
            "cache_path": str(tmp_path / "cache" / "model-calls.sqlite"),
        }
    )
    replay = ReplayConfig(**REPLAY, arms=arms)
    run1 = tmp_path / "run1"
    counts = replay_corpus(corpus, run1, replay, model, 20)
    assert counts["baseline"] == counts["test-twin"] >= 40 and counts["test-short-tail"] >= 40

    events = {a: _events(run1, a) for a in arms}
    keys = {a: [e["request_key"] for e in evs] for a, evs in events.items()}
    for evs in events.values():
        for e in evs:
            assert e["summary_error"] is None, e["summary_error"]
            assert e["summary"].strip() and not is_refusal(e["summary"]) and REFUSAL_TEXT not in e["summary"]
    # Identical input, one call: the twin arm's requests are the baseline's, answered once.
    assert keys["test-twin"] == keys["baseline"]
    assert [e["summary"] for e in events["test-twin"]] == [e["summary"] for e in events["baseline"]]

    # An attempt the client stopped waiting for (its 0.5 s timeout) gets its status amended when
    # the server lets go of it: wait until the log has been quiet for a second (bounded).
    log = [e for e in settled_log(log_path, quiet=1.0) if e["method"] == "POST"]
    # Every fault type was injected, each at about 10% of requests.
    share = {f: sum(e["fault"] == f for e in log) / len(log) for f in RETRIED}
    # (Loose bounds: extra attempts caused by a loaded machine's timeouts redraw faults.)
    assert all(0.04 < v < 0.2 for v in share.values()), share
    # Exactly the expected requests: one answered call per distinct request, no other request.
    expected = set(keys["baseline"]) | set(keys["test-short-tail"])
    ok = [e["key"] for e in answered(log)]
    assert sorted(ok) == sorted(expected)  # no duplicates, nothing missing
    assert {e["key"] for e in log} == expected  # faulted attempts were retries of those only
    n_log = len(read_log(log_path))

    # A second run of the same experiment makes zero HTTP requests.
    run2 = tmp_path / "run2"
    replay_corpus(corpus, run2, replay, model, 20)
    assert len(read_log(log_path)) == n_log
    assert _events(run2, "baseline") == events["baseline"]

    # The replay backend answers from the cache alone.
    run3 = tmp_path / "run3"
    replay_corpus(corpus, run3, replay, model.model_copy(update={"backend": "replay"}), 20)
    assert len(read_log(log_path)) == n_log
    assert [e["summary"] for e in _events(run3, "test-short-tail")] == [
        e["summary"] for e in events["test-short-tail"]
    ]
    _assert_secret_absent(run1, run2, run3, tmp_path / "cache", log_path)


@pytest.mark.slow
def test_sigkill_mid_run_then_rerun_loses_nothing_and_repeats_no_call(tmp_path, fake_server_process):
    url, log_path = fake_server_process(
        "--latency",
        "0.05",
        "--fault",
        "429=0.1",
        "--fault",
        "500=0.1",
        "--retry-after",
        "0.01",
        "--no-bodies",
    )
    suite = ROOT / "probes" / "default.toml"
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        f"""name = "killtest"
seed = 7
[corpus]
kind = "synth"
sessions = 4
session_tokens = 300000  # ~8 compactions a session at this window
[replay]
arms = ["baseline"]
window = 40000
reserve = 4000
keep_recent = 5000
workers = 2
[model]
backend = "openai"
model = "fake-model"
base_url = "{url}"
timeout = 5.0
max_retries = 8
backoff_base = 0.01
backoff_max = 0.05
[score]
suite = "{suite}"
"""
    )
    run_dir = tmp_path / "run"
    cache = run_dir / "model-calls.sqlite"
    env = {**os.environ, "OPENAI_API_KEY": SECRET}
    args = ("run", "--config", str(cfg), "--run-dir", str(run_dir), "--resume")
    cmd = evalkit_cmd(*args)
    # Own process group, so SIGKILL takes the replay workers down with the run.
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while len(cache_keys(cache)) < 15 and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "the run finished before it could be killed; make it longer"
    os.killpg(p.pid, signal.SIGKILL)
    out1, err1 = p.communicate()
    settled_log(log_path, quiet=1.0)  # let the server log any request that was on the wire
    before = cache_keys(cache)
    n_log = len(read_log(log_path))
    assert len(before) >= 15 and not (run_dir / "events" / "baseline.jsonl").exists()

    # The rerun in this process (run_cli): the kill needed a process; the rerun only reads the
    # files the killed one left.
    done = run_cli(*args, env={"OPENAI_API_KEY": SECRET})
    assert done.returncode == 0, done.stderr
    after = cache_keys(cache)
    assert before <= after  # nothing completed was lost
    resent = [e for e in read_log(log_path)[n_log:] if e["key"] in before]
    assert resent == []  # no completed call was repeated
    # The run folder reports its model calls (every cached call: summaries, answers, judgements).
    calls = json.loads((run_dir / "model-calls.json").read_text())
    assert calls["calls"] == len(after) and calls["input_tokens"] > 0
    events = _events(run_dir, "baseline")
    assert events and all(e["summary_error"] is None and e["summary"] for e in events)
    # The score stage's judge probes add answer/judge calls to the same cache; the summaries are
    # exactly the summarize calls.
    assert {e["request_key"] for e in events} == cache_keys(cache, "summarize")
    _assert_secret_absent(run_dir, log_path, texts=(done.stdout, done.stderr, out1.decode(), err1.decode()))
