"""Item 4 of issue 19: an unusable endpoint stops the run (exit 2, one line) instead of failing
every call for minutes, and a failed compaction is retried on a schedule, not at every turn."""

from __future__ import annotations

import itertools
import json
import socket
from collections import Counter

import pytest

from .hardening import evalkit, tiny_corpus, write_experiment


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
    done = evalkit("run", "--config", str(exp), "--run-dir", str(run), timeout=60)
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
    done = evalkit("run", "--config", str(exp), "--run-dir", str(run))
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
