"""`evalkit export inspect`: a run as Inspect AI eval logs, read back with inspect_ai's own API."""

from __future__ import annotations

import json

import pytest

from evalkit.cli import main
from evalkit.contracts.metrics import read_metrics

inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai not installed (evalkit[inspect])")


def test_export_reads_back_with_inspect_ai(tmp_path):
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        'name = "exported"\n[corpus]\nkind = "synth"\nsessions = 2\n'
        '[replay]\narms = ["baseline", "masking"]\nworkers = 1\n[continuation]\nenabled = false\n'
    )
    run = tmp_path / "run"
    assert main(["run", "--config", str(cfg), "--run-dir", str(run)]) == 0
    assert main(["export", "inspect", str(run), "--out", str(tmp_path / "logs")]) == 0
    metrics = read_metrics(run / "metrics.parquet")
    for arm in ("baseline", "masking"):
        log = inspect_log.read_eval_log(str(tmp_path / "logs" / f"{arm}.eval"))
        events = [json.loads(x) for x in (run / "events" / f"{arm}.jsonl").read_text().splitlines()]
        assert log.status == "success" and log.eval.task == "evalkit/exported"
        assert log.eval.model == "extractive/extractive-v1" and log.eval.metadata["offline_standin"] is True
        assert len(log.samples) == log.results.total_samples == len(events)
        by_id = {s.id: s for s in log.samples}
        for e in events:
            s = by_id[f"{e['session']}/{e['event']}"]
            assert s.output.completion == e["summary"]  # the stand-in's summary, its label first
            rows = metrics[
                (metrics["arm"] == arm)
                & (metrics["session"] == e["session"])
                & (metrics["event"] == e["event"])
            ]
            for _, r in rows.iterrows():
                if r["error"] is not None and str(r["error"]) not in ("nan", "<NA>"):
                    # an error is an error, never a score of 0
                    assert r["metric"] not in s.scores and s.metadata["errors"][r["metric"]] == r["error"]
                elif r["metric"] in s.scores:
                    assert s.scores[r["metric"]].value == pytest.approx(float(r["value"]))
        assert {sc.name for sc in log.results.scores} >= {"tally_present", "compression"}
    masking = inspect_log.read_eval_log(str(tmp_path / "logs" / "masking.eval"))
    assert any("growth" in s.metadata["errors"] for s in masking.samples)  # growth fails under masking
