"""Item 3 of issue 19: a cut-off answer (finish_reason = "length") is recorded as truncated, never
cached, and never scored as a summary."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from evalkit.testing.faults import FaultPlan
from evalkit.testing.serverlog import answered, read_log
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, write_experiment


def _model(url: str, cache) -> dict:
    return {
        "backend": "openai",
        "model": "fake-model",
        "base_url": url,
        "timeout": 10.0,
        "max_retries": 3,
        "backoff_base": 0.01,
        "backoff_max": 0.02,
        "cache_path": str(cache),
    }


@pytest.mark.slow
def test_length_fault_is_truncated_never_cached_nor_scored(tmp_path, fake_server):
    server = fake_server(FaultPlan({"length": 1.0}), log_bodies=False)
    url, port = server.url, server.httpd.server_address[1]
    corpus = tiny_corpus(tmp_path / "corpus")
    cache = tmp_path / "calls.sqlite"
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=_model(url, cache))
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    events = [json.loads(x) for x in (run / "events" / "baseline.jsonl").read_text().splitlines()]
    assert events and all(e["summary_error"] and "truncated" in e["summary_error"] for e in events)
    assert all(not e["summary"] for e in events)
    with sqlite3.connect(cache) as con:
        assert con.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 0
    m = pd.read_parquet(run / "metrics.parquet")
    from_summary = {"tally_present", "constraints_kept", "files_known", "failures_known", "summary_tokens"}
    scored = m[(m.arm == "baseline") & m.metric.isin(from_summary)]
    assert len(scored) and scored.value.isna().all() and scored.error.str.contains("truncated").all()

    # The same requests against a healthy endpoint are sent again (nothing truncated was trusted).
    server.stop()
    healthy = fake_server(None, port=port, log_bodies=False)  # same endpoint, so the same cache keys
    done = run_cli("run", "--config", str(exp), "--run-dir", str(tmp_path / "run2"))
    assert done.returncode == 0, done.stderr
    events2 = [
        json.loads(x) for x in (tmp_path / "run2" / "events" / "baseline.jsonl").read_text().splitlines()
    ]
    assert events2 and all(e["summary_error"] is None and e["summary"] for e in events2)
    sent = {e["key"] for e in answered(read_log(healthy.log_path)) if e["purpose"] == "summarize"}
    # Each session's first compaction is the same request in both runs: sent again, not replayed.
    assert {e["request_key"] for e in events if e["round"] == 1} <= sent


def test_fault_rates_outside_0_1_are_refused():
    with pytest.raises(ValueError, match="outside"):
        FaultPlan({"500": -0.5, "429": 0.7})
    done = run_cli("fake-server", "--fault", "500=-0.2")
    assert done.returncode == 2 and "outside" in done.stderr
