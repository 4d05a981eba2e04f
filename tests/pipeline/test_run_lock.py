"""Item 2 of issue 19: one writer per run folder, and runs sharing a cache pay each call once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from urllib.parse import urlsplit

import pytest

from evalkit.testing.serverlog import answered, read_log
from tests.support.cli import run_cli
from tests.support.runs import copy_run, evalkit, tiny_corpus, verdict_script, write_experiment


def _openai(url: str, **kw) -> dict:
    return {
        "backend": "openai",
        "model": "fake-model",
        "base_url": url,
        "timeout": 10.0,
        "max_retries": 2,
        "backoff_base": 0.01,
        "backoff_max": 0.02,
        **kw,
    }


@pytest.mark.slow
def test_second_run_into_a_busy_folder_exits_2_naming_the_holder(tmp_path, fake_server_process):
    # Each answer takes 2 s, so the first run is still waiting on one while the second starts: with
    # 0.2 s a loaded machine's first run finished before the second took the lock, and the second
    # found a complete run.
    url, log = fake_server_process("--latency", "2.0", "--no-bodies")
    corpus = tiny_corpus(tmp_path / "corpus")
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=_openai(url))
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "evalkit", "run", "--config", str(exp), "--run-dir", str(run)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + 60
        # Its first request reached the endpoint: the folder is the run's (the lock is taken before).
        while first.poll() is None and time.time() < deadline:
            if log.exists() and '"POST"' in log.read_text(encoding="utf-8", errors="replace"):
                break
            time.sleep(0.05)
        assert first.poll() is None, "the first run ended before the second started"
        second = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--resume")
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert f"pid {first.pid}" in lines[0] and socket.gethostname() in lines[0] and str(run) in lines[0]
        assert first.poll() is None  # the holder was not disturbed
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    # The killed holder's lock died with it: a resumed run gets the folder. It makes the whole
    # run's ~35 calls; served on the same URL (the config, hash included, is unchanged) by a server
    # without the 2 s latency, which only had to keep the first run busy.
    fake_server_process.stop(url)
    fake_server_process("--no-bodies", "--port", str(urlsplit(url).port))
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--resume")
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_two_runs_sharing_one_cache_pay_each_call_once(tmp_path, fake_server_process):
    url, log = fake_server_process(
        "--latency", "0.01", "--no-bodies", "--script", str(verdict_script(tmp_path))
    )
    corpus = tiny_corpus(tmp_path / "corpus", n=3)
    cache = tmp_path / "shared" / "calls.sqlite"
    exp = write_experiment(
        tmp_path / "exp.toml", corpus, model=_openai(url, cache_path=str(cache)), replay={"workers": 2}
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evalkit",
                "run",
                "--config",
                str(exp),
                "--run-dir",
                str(tmp_path / f"run{i}"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    paid = Counter(e["key"] for e in answered(read_log(log)))
    assert paid and max(paid.values()) == 1, [k for k, n in paid.items() if n > 1]


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["score", "continue"])
def test_rescoring_a_folder_another_process_writes_exits_2(tmp_path, shared_tiny_run, verb):
    from evalkit.pipeline.lock import run_lock

    run = copy_run(shared_tiny_run, tmp_path)
    with run_lock(run, "the test holding it"):
        done = evalkit(verb, str(run))
    assert done.returncode == 2 and f"pid {os.getpid()}" in done.stderr, done.stderr
    assert run_cli(verb, str(run)).returncode == 0  # released
