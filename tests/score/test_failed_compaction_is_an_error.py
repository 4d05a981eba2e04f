"""Item 8 of issue 19: a failed compaction is an error for every metric that depends on its
summary (redundant, the continuation's refail/redo/...), never a value."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evalkit.score import PROBES
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, write_experiment

STRUCTURAL = {"over_limit", "lost_chars", "truncated_chars", "tool_pairs_valid"}  # the context itself
# The cadence probe measures the compaction cycle itself (what it freed, what its calls cost, how
# soon the next came), which a failed summary call also has.
CYCLE = set(PROBES.entry("cadence").info["metrics"])  # needs_summary=False


@pytest.mark.slow
def test_failed_compactions_are_errors_for_summary_metrics(tmp_path, fake_server_process):
    url, _ = fake_server_process("--fault", "500=0.5", "--no-bodies")
    corpus = tiny_corpus(tmp_path / "corpus", n=3)
    model = {"backend": "openai", "model": "m", "base_url": url, "max_retries": 0, "timeout": 10.0}
    exp = write_experiment(
        tmp_path / "exp.toml", corpus, model=model, continuation={"enabled": True, "agent": "heuristic"}
    )
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    m = pd.read_parquet(run / "metrics.parquet")
    events = [json.loads(x) for x in (run / "events" / "baseline.jsonl").read_text().splitlines()]
    failed = {(e["session"], e["event"]) for e in events if e["summary_error"] and not e["removed_ids"]}
    assert failed and len(failed) < len(events), "need both failed and good compactions"
    m = m[m.arm == "baseline"]
    at = pd.Series(list(zip(m.session, m.event, strict=True)), index=m.index)
    rows = m[at.isin(failed)]
    dependent = rows[~rows.metric.isin(STRUCTURAL | CYCLE)]
    assert {"refail_30", "redo_30"} <= set(dependent.metric), sorted(set(dependent.metric))
    valued = dependent[dependent.value.notna()]
    assert valued.empty, sorted(set(valued.metric))
    assert dependent.error.str.contains("failed").all()
    # A compaction right after a failed one is not "redundant" for the failure's sake.
    after = {(s, e + 1) for s, e in failed}
    red_after = m[(m.metric == "redundant") & at.isin(after)]
    assert len(red_after) and red_after.value.isna().all()
