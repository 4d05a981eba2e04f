"""Provider batch jobs against the fake server's files and batches endpoints (real HTTP, the real
openai SDK): partial failures and an expired batch still give the direct run's metrics with no
call paid twice; a killed run's batch is collected on resume, never resubmitted; a cancelled
batch's requests go into the next one; stragglers stop the run unless batch_fallback is on."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from evalkit.contracts.config import load_experiment
from evalkit.models.client import build_client
from evalkit.models.spending import RunIncomplete, incomplete
from evalkit.pipeline.run import run_experiment
from evalkit.replay.batch import RECORD, BatchJobs, BatchSettings, Frontier, batch_replay
from evalkit.replay.frontier import walk
from evalkit.testing.serverlog import answered, read_log
from tests.pipeline.test_plan import write_config

from .test_budget import _metrics

ARMS = ("baseline", "head-tail")
FAST = {"batch": True, "batch_poll_s": 0.05}
WINDOW = 120_000  # a few compaction rounds per session: a few batches


def _records(run) -> list[dict]:
    return [json.loads(x) for x in (run / RECORD).read_text().splitlines()]


@pytest.mark.slow
def test_batch_run_with_failures_and_an_expired_batch_matches_a_direct_run(tmp_path, fake_server_process):
    url_a, log_a = fake_server_process("--no-bodies")
    run_experiment(
        load_experiment(write_config(tmp_path / "a", url_a, arms=ARMS, sessions=2, window=WINDOW)),
        tmp_path / "a" / "run",
    )
    direct = answered(read_log(log_a))

    url_b, log_b = fake_server_process(
        "--no-bodies", "--batch-fail", "0.5", "--batch-expire", "1", "--batch-delay", "0.05"
    )
    exp = load_experiment(
        write_config(tmp_path / "b", url_b, arms=ARMS, sessions=2, window=WINDOW, batch_max_rounds=16, **FAST)
    )
    run_b = tmp_path / "b" / "run"
    run_experiment(exp, run_b)
    log = read_log(log_b)
    sent = answered(log)
    keys = Counter(e["key"] for e in sent)
    assert max(keys.values()) == 1 and len(keys) == len(direct)  # zero duplicate paid calls
    summarizer = {e["key"] for e in direct if e.get("purpose") == "summarize"}
    via_batch = {e["key"] for e in sent if e.get("via") == "batch"}
    # Every summarizer call went through a batch (keys differ between the runs: the endpoint is keyed).
    assert len(via_batch) == len(summarizer) and not any(e.get("purpose") == "summarize" for e in sent)
    recs = _records(run_b)
    collected = [r for r in recs if r["event"] == "collected"]
    assert collected[0]["status"] == "expired" and collected[0]["failed"] > 0
    assert any(e.get("fault") == "500" and e.get("via") == "batch" for e in log)  # partial failures met
    rounds = max(
        e["round"]
        for a in ARMS
        for e in map(json.loads, (run_b / "events" / f"{a}.jsonl").read_text().splitlines())
    )
    submitted = [r for r in recs if r["event"] == "submitted"]
    failed_lines = sum(r["failed"] for r in collected)
    # A batch per round, plus one per round held back by a failed line (its resubmission).
    assert rounds <= len(submitted) <= rounds + failed_lines, (rounds, len(submitted), failed_lines)
    pd.testing.assert_frame_equal(_metrics(tmp_path / "a" / "run"), _metrics(run_b))


def _setup(tmp_path, url, **model):
    exp = load_experiment(
        write_config(tmp_path, url, arms=ARMS, sessions=1, window=WINDOW, **{**FAST, **model})
    )
    run = tmp_path / "run"
    from evalkit.pipeline.run import RunPaths, stage_corpus

    stage_corpus(exp, RunPaths(run))
    m = exp.config.model.model_copy(update={"cache_path": str(run / "model-calls.sqlite")})
    return exp, run, m


def test_a_killed_runs_batch_is_collected_on_resume_not_resubmitted(tmp_path, fake_server_process):
    url, log = fake_server_process("--no-bodies", "--batch-delay", "0.3")
    exp, run, model = _setup(tmp_path, url)
    replay = exp.config.replay
    client = build_client(model, run)
    frontier = Frontier(client)
    walk(_sessions(run), list(ARMS), replay, model, frontier)
    jobs = BatchJobs(client, run, BatchSettings.from_model(model))
    first = jobs.submit(frontier.misses, 1)  # ...and the run is killed here
    stats = batch_replay(run / "corpus", run, replay, model)
    recs = _records(run)
    assert recs[1] == {**recs[1], "event": "collected", "batch": first}  # collected first, by its id
    assert stats["batches"] == len([r for r in recs if r["event"] == "submitted"]) - 1
    keys = Counter(e["key"] for e in answered(read_log(log)))
    assert max(keys.values()) == 1
    assert not any(
        k in keys and v > 1
        for k, v in Counter(k for r in recs if r["event"] == "submitted" for k in r["keys"]).items()
    )


def test_cancelled_batch_is_resubmitted_and_stragglers_stop_the_run(tmp_path, fake_server_process):
    url, _ = fake_server_process("--no-bodies", "--batch-delay", "0.3", "--batch-fail", "1.0")
    exp, run, model = _setup(tmp_path, url, batch_max_rounds=2)
    client = build_client(model, run)
    frontier = Frontier(client)
    walk(_sessions(run), list(ARMS), exp.config.replay, model, frontier)
    jobs = BatchJobs(client, run, BatchSettings.from_model(model))
    bid = jobs.submit(frontier.misses, 1)
    jobs.sdk.batches.cancel(bid)
    failed = jobs.collect(bid, frontier.misses)
    assert set(failed) == set(frontier.misses) and set(failed.values()) == {"batch_cancelled"}
    # Every line fails (--batch-fail 1.0): after batch_max_rounds submissions the run stops, incomplete.
    with pytest.raises(RunIncomplete, match="batch_fallback"):
        run_experiment(exp, run)
    assert incomplete(run)["reason"] == "batch"
    tries = Counter(k for r in _records(run) if r["event"] == "submitted" for k in r["keys"])
    assert set(tries.values()) == {2}


@pytest.mark.slow
def test_stragglers_go_direct_with_fallback(tmp_path, fake_server_process):
    url, log = fake_server_process("--no-bodies", "--batch-delay", "0.05", "--batch-fail", "1.0")
    exp, run, _ = _setup(tmp_path, url, batch_max_rounds=1, batch_fallback=True)
    run_experiment(exp, run)
    sent = answered(read_log(log))
    assert sent and all(e.get("via") != "batch" for e in sent)  # every batch line failed; all went direct
    assert incomplete(run) is None


def _sessions(run):
    from evalkit.replay.batch import _sessions as read

    return read(run / "corpus")


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_its_batch(tmp_path, fake_server_process):
    """`evalkit run` in a subprocess, killed (SIGKILL) while its first batch is in flight; the
    resumed run collects that batch by id: no batch is created twice for a request and no call is
    paid twice."""
    import os
    import signal
    import subprocess
    import sys
    import time

    url, log = fake_server_process("--no-bodies", "--batch-delay", "0.5")
    cfg = write_config(tmp_path, url, arms=ARMS, sessions=1, window=WINDOW, **FAST)
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", "--config", str(cfg), "--run-dir", str(run)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 60
        while not ((run / RECORD).exists() and "submitted" in (run / RECORD).read_text()):
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    first = _records(run)
    assert [r["event"] for r in first] == ["submitted"]
    run_experiment(load_experiment(cfg), run, resume=True)
    recs = _records(run)
    assert recs[1]["event"] == "collected" and recs[1]["batch"] == first[0]["batch"]
    tries = Counter(k for r in recs if r["event"] == "submitted" for k in r["keys"])
    assert max(tries.values()) == 1  # nothing resubmitted (no line fails here)
    keys = Counter(e["key"] for e in answered(read_log(log)))
    assert max(keys.values()) == 1
