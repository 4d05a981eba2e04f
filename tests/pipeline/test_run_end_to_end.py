"""The walking skeleton end to end through the CLI, on a small synthetic corpus."""

from __future__ import annotations

import json

import pytest

from evalkit import load_run
from evalkit.cli import main


@pytest.mark.slow
def test_run_end_to_end_is_deterministic(tmp_path, capsys):
    cfg = tmp_path / "exp.toml"
    # Sessions of ~400k tokens compact two or three times at the default window: enough here.
    cfg.write_text('name = "tiny"\n[corpus]\nsessions = 4\nsession_tokens = 400000\n[replay]\nworkers = 2\n')
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "a")]) == 0
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "b")]) == 0
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    assert (tmp_path / "a/events/baseline.jsonl").read_bytes() == (
        tmp_path / "b/events/baseline.jsonl"
    ).read_bytes()
    assert a.metrics.equals(b.metrics)
    ev = a.events()
    assert len(ev) >= 4 * 2  # every session forces at least two compactions
    assert (ev["tokens_before"] > 183_616).all() and (ev["tokens_after"] < ev["tokens_before"]).all()
    assert ev["inv_tool_pairs_valid"].all()
    assert set(a.metrics["metric"]) >= {"tally_present", "constraints_kept"}
    shares = a.metrics[a.metrics["metric"].isin(["tally_present", "constraints_kept", "structure_ok"])]
    assert shares["value"].between(0, 1).all() and a.metrics["error"].isna().all()
    report = (tmp_path / "a/report/report.md").read_text()
    # constraints_kept is scored for the sessions where the facts find a constraint (not all: most
    # synthetic rules carry no rule word the extractor knows).
    with_rules = sum(
        bool(json.loads(x)["constraints"]) for x in (tmp_path / "a/corpus/facts.jsonl").read_text().splitlines()
    )
    assert 1 <= with_rules <= 4
    means = report.split("## Metric means")[1].split("\n## ")[0]
    assert "**Offline stand-in.**" in report and "constraints_kept ↑" in means
    from evalkit.contracts import aggregate

    summary = aggregate.summary(aggregate.load(tmp_path / "a"))
    n = next(d["sessions"] for d in summary if d["metric"] == "constraints_kept" and d["arm"] == "baseline")
    assert n == with_rules
    cfg_json = json.loads((tmp_path / "a/config.json").read_text())
    assert cfg_json["config"]["corpus"]["sessions"] == 4 and len(cfg_json["config_hash"]) == 64
