"""Item 4 of issue 19: an unusable endpoint stops the run (exit 2, one line) instead of failing
every call for minutes, and a failed compaction is retried on a schedule, not at every turn."""

from __future__ import annotations

import itertools
import json
import socket
from collections import Counter

import pytest

from tests.support.cli import run_cli
from tests.support.runs import cache_keys, evalkit_cmd, tiny_corpus, write_experiment


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["refused", "404"])
def test_unusable_endpoint_stops_with_exit_2(tmp_path, fake_server_process, where):
    if where == "refused":
        url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    else:
        url = fake_server_process("--no-bodies")[0] + "/no-such-path"
    corpus = tiny_corpus(tmp_path / "corpus")
    # Default retries and backoff: the run must stop on its own, well before the 60 s bound.
    exp = write_experiment(
        tmp_path / "exp.toml", corpus, model={"backend": "openai", "model": "m", "base_url": url}
    )
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 2, done.stderr
    err = [ln for ln in done.stderr.splitlines() if "error" in ln]
    assert len(err) == 1 and "consecutive attempts failed" in err[0] and "127.0.0.1" in err[0], done.stderr
    assert "Traceback" not in done.stderr
    assert (run / "config.json").exists() and not (run / "metrics.parquet").exists()


@pytest.mark.slow
def test_a_failing_summarizer_is_retried_on_a_schedule(tmp_path, fake_server_process):
    url, _ = fake_server_process("--fault", "500=1.0", "--no-bodies")
    corpus = tiny_corpus(tmp_path / "corpus")
    model = {"backend": "openai", "model": "m", "base_url": url, "max_retries": 0, "timeout": 10.0}
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr  # a 500 is not the endpoint being unusable
    events = [json.loads(x) for x in (run / "events" / "baseline.jsonl").read_text().splitlines()]
    assert events and all(e["summary_error"] for e in events)
    per_session = Counter(e["session"] for e in events)
    # Every turn past the threshold is a trigger point (dozens per session); retries after 1, 3,
    # 7, 15... of them leave a handful of attempts.
    assert len(per_session) == 2 and all(2 <= n <= 7 for n in per_session.values()), per_session
    for sid in per_session:
        at = [e["at_message"] for e in events if e["session"] == sid]
        gaps = [b - a for a, b in itertools.pairwise(at)]
        assert gaps == sorted(gaps), (sid, at)  # the waits grow


@pytest.mark.slow
def test_an_endpoint_dying_mid_run_stops_it_and_keeps_what_is_done(tmp_path, fake_server):
    import subprocess
    import time

    from evalkit.testing.faults import FaultPlan
    from evalkit.testing.serverlog import read_log

    server = fake_server(FaultPlan(latency_s=0.05), log_bodies=False)
    port = server.httpd.server_address[1]
    corpus = tiny_corpus(tmp_path / "corpus", n=3)
    model = {
        "backend": "openai",
        "model": "m",
        "base_url": server.url,
        "backoff_base": 0.05,
        "backoff_max": 0.2,
    }
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model)
    run = tmp_path / "run"
    cmd = evalkit_cmd("run", "--config", str(exp), "--run-dir", str(run), "--resume")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while len(cache_keys(run / "model-calls.sqlite")) < 4 and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before the endpoint went away"
    server.stop()  # connection refused from now on
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    assert "consecutive attempts failed" in err and "Traceback" not in err
    done_before = cache_keys(run / "model-calls.sqlite")
    assert len(done_before) >= 4
    usage = json.loads((run / "model-usage.json").read_text())["total"]
    assert usage["answered"] >= len(done_before) and usage["failures"] >= 1

    back = fake_server(None, port=port, log_bodies=False)
    done = run_cli(*cmd[3:])
    assert done.returncode == 0, done.stderr
    resent = [e for e in read_log(back.log_path) if e.get("key") in done_before]
    assert resent == []  # what was answered before the failure is kept, not paid again
