"""Item 5 of issue 19: killing `evalkit run` during replay leaves no worker process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.runs import tiny_corpus, write_experiment


def _children(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigkill_of_the_run_during_replay_leaves_no_worker(tmp_path, fake_server_process):
    url, _ = fake_server_process("--latency", "0.3", "--no-bodies")
    corpus = tiny_corpus(tmp_path / "corpus", n=4)
    model = {"backend": "openai", "model": "m", "base_url": url, "timeout": 10.0}
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model, replay={"workers": 2})
    cmd = [sys.executable, "-m", "evalkit", "run", "--config", str(exp), "--run-dir", str(tmp_path / "run")]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    workers: set[int] = set()
    deadline = time.time() + 60
    while len(workers) < 2 and p.poll() is None and time.time() < deadline:
        workers = _children(p.pid)
        time.sleep(0.05)
    assert len(workers) >= 2 and p.poll() is None, "no replay workers seen"
    time.sleep(0.5)  # workers are mid-call now
    os.kill(p.pid, signal.SIGKILL)  # the parent only, as the OOM killer would
    p.wait()
    deadline = time.time() + 20
    while any(_alive(w) for w in workers) and time.time() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if _alive(w)]
    for w in left:  # clean up before failing
        os.kill(w, signal.SIGKILL)
    assert left == []
