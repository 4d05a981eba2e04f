"""Run-folder records (evalkit.contracts.records / runs): one writer and one reader each, versioned;
``evalkit.load_run`` on a real run; a folder written by 1656aa3 loads; a version or shape this
evalkit does not read is one line naming the file, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import evalkit
from evalkit.contracts.records import (
    RECORDS,
    SCHEMA_VERSION,
    Calibration,
    CallStats,
    ContinuationManifest,
    CorpusManifest,
    Decision,
    Health,
    Incomplete,
    JudgeBudget,
    ModelUsage,
    Plan,
    RunConfig,
    ShardMarker,
    Timings,
    Warnings,
)
from evalkit.contracts.runs import (
    RecordVersionError,
    RunFolderError,
    RunPaths,
    load_run,
    read_record,
    write_record,
)
from tests.conftest import FIXTURES
from tests.support.runs import evalkit as evalkit_process
from tests.support.runs import refused, tiny_corpus, write_experiment

# A run folder written by evalkit 1656aa3 (`evalkit run --sessions 4`), its JSON records cut down
# to two verdicts: README.md there says how it was made.
OLD = FIXTURES / "runs" / "ref-1656aa3"


def _old(name: str) -> dict:
    return json.loads((OLD / name).read_text(encoding="utf-8"))


SAMPLES = {
    RunConfig: lambda: _old("config.json"),
    CorpusManifest: lambda: _old("corpus/manifest.json"),
    ContinuationManifest: lambda: _old("continuation/manifest.json"),
    Decision: lambda: _old("decision.json"),
    Health: lambda: _old("health.json"),
    Timings: lambda: _old("timings.json"),
    ModelUsage: lambda: {"source": "client", "total": {"requests": 3, "answered": 3}, "invocations": 1},
    CallStats: lambda: {"calls": 2, "input_tokens": 10, "output_tokens": 4, "cost_usd": 0.01},
    Plan: lambda: {"totals": {"all": {"requests": 12}}, "created_at": 1.5, "invocation": "x"},
    Incomplete: lambda: {"reason": "budget", "detail": "spent $1.00", "calls_planned": 9},
    JudgeBudget: lambda: {"budget": 1200, "grid": [600, 1200], "sweep": {"600": {"mean": 50.0}}},
    ShardMarker: lambda: {"shard": 1, "shards": 2, "config_hash": "ab12", "sessions": ["s1"]},
    Warnings: lambda: {"warnings": [{"kind": "k", "text": "t"}], "endpoints": []},
    Calibration: lambda: {"run": "r", "experiments": 4, "rows": [{"candidate": "a", "metric": "m"}]},
}


def test_every_record_has_a_sample_and_a_file_of_its_own():
    assert set(SAMPLES) == set(RECORDS)
    assert len({cls.FILE for cls in RECORDS}) == len(RECORDS)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_record_round_trip(tmp_path, cls):
    body = SAMPLES[cls]()
    written = write_record(tmp_path, cls, body)
    on_disk = json.loads(RunPaths(tmp_path).record(cls).read_text(encoding="utf-8"))
    assert on_disk["schema_version"] == SCHEMA_VERSION
    # What the writer gave is what is on disk, fields no model names included.
    assert {k: v for k, v in on_disk.items() if k != "schema_version"} == body
    back = read_record(tmp_path, cls)
    assert back == written
    assert back.model_dump() == written.model_dump()


def test_an_old_decision_reads_typed(tmp_path):
    d = read_record(OLD, Decision)
    assert d.schema_version == 1  # written before records were versioned
    v = d.verdicts["bridge"]
    raw = _old("decision.json")["verdicts"]["bridge"]
    assert v.verdict == raw["verdict"] and v.reason == raw["reason"]
    m = v.metrics[v.deciding_metric]
    assert m.estimate == raw["metrics"][raw["deciding_metric"]]["estimate"]
    assert m.ci == raw["metrics"][raw["deciding_metric"]]["ci"]
    # fields the model does not name are kept (as extra fields), and read by attribute only
    assert m.model_extra["unmatched_sessions"] == raw["metrics"][raw["deciding_metric"]]["unmatched_sessions"]
    assert m.unmatched == raw["metrics"][raw["deciding_metric"]]["unmatched"]
    with pytest.raises(AttributeError):
        v.get("reason")  # a by-key read would turn a renamed field into a silent None


def _copy_old(tmp_path: Path) -> Path:
    run = tmp_path / "old"
    shutil.copytree(OLD, run, ignore=shutil.ignore_patterns("README.md"))
    return run


@pytest.mark.parametrize(
    "version,says",
    [(99, "written by a newer evalkit (schema 99)"), (0, "written by evalkit schema 0")],
)
def test_a_version_this_evalkit_does_not_read_names_the_file(tmp_path, version, says):
    run = _copy_old(tmp_path)
    body = {**_old("timings.json"), "schema_version": version}
    (run / "timings.json").write_text(json.dumps(body))
    with pytest.raises(RecordVersionError) as e:
        _ = load_run(run).timings
    assert str(e.value).startswith(f"{run / 'timings.json'}: {says}")
    assert f"reads schema 1 to {SCHEMA_VERSION}" in str(e.value)


def test_a_field_of_the_wrong_type_names_the_file_and_field(tmp_path):
    (tmp_path / "timings.json").write_text(json.dumps({"corpus": "fast"}))
    with pytest.raises(RunFolderError, match=r"timings\.json: field 'corpus': "):
        read_record(tmp_path, Timings)


def test_load_run_reads_lazily_and_absent_records_are_none(tmp_path):
    run = load_run(_copy_old(tmp_path))
    assert "_records" not in run.__dict__ and "metrics" not in run.__dict__  # nothing read yet
    assert run.plan is None and run.shard is None and run.usage is None
    assert run.config == _old("config.json")["config"]
    assert run.manifest.stats == _old("corpus/manifest.json")["stats"]
    assert run.timings.stages() == _old("timings.json")
    assert len(run.metrics) == 0  # no metrics.parquet in the fixture: an empty table


def test_usage_of_an_older_folder_reads_model_calls_json(tmp_path):
    write_record(tmp_path, CallStats, SAMPLES[CallStats]())
    write_record(tmp_path, RunConfig, {"config": {}})
    assert isinstance(load_run(tmp_path).usage, CallStats)
    write_record(tmp_path, ModelUsage, SAMPLES[ModelUsage]())
    assert isinstance(load_run(tmp_path).usage, ModelUsage)


# --------------------------------------------------------------------------- real processes


@pytest.mark.slow
def test_a_1656aa3_folder_is_reported_and_compared(tmp_path):
    run = _copy_old(tmp_path)
    done = evalkit_process("report", str(run), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    text = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    raw = _old("decision.json")["verdicts"]
    for cand, v in raw.items():  # the verdicts table: candidate, verdict, deciding metric, effect, n
        est = v["metrics"][v["deciding_metric"]]["estimate"]
        row = f"| `{cand}` | ⏸ {v['verdict']} | `{v['deciding_metric']}` | {est:+.3f} ["
        assert row in text, (row, text[:3000])
    done = evalkit_process("compare", str(run), str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"**0 of {len(raw)} verdicts changed.**" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["report", "gate"])
def test_a_newer_record_version_is_one_line_exit_2(tmp_path, verb):
    run = _copy_old(tmp_path)
    body = {**_old("config.json"), "schema_version": 7}
    (run / "config.json").write_text(json.dumps(body))
    argv = {"report": ["report", str(run), "--out", str(tmp_path / "rep")], "gate": ["gate", str(run)]}[verb]
    line = refused(evalkit_process(*argv, cwd=tmp_path), str(run / "config.json"), "schema 7")
    assert f"reads schema 1 to {SCHEMA_VERSION}" in line
    assert not (tmp_path / "rep").exists()


@pytest.mark.slow
def test_a_decision_of_the_wrong_shape_is_one_line_exit_2(tmp_path):
    run = _copy_old(tmp_path)
    body = _old("decision.json")
    body["verdicts"]["bridge"]["metrics"] = ["not", "an", "object"]
    (run / "decision.json").write_text(json.dumps(body))
    line = refused(evalkit_process("report", str(run), "--out", str(tmp_path / "rep"), cwd=tmp_path))
    assert f"{run / 'decision.json'}: field 'verdicts.bridge.metrics': " in line, line


@pytest.mark.slow
def test_load_run_on_a_tiny_real_run(tmp_path):
    corpus = tiny_corpus(tmp_path / "src", n=2)
    exp = write_experiment(tmp_path / "exp.toml", corpus)
    done = evalkit_process("run", "--config", str(exp), "--run-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    run = evalkit.load_run(tmp_path / "r")
    for cls in (RunConfig, CorpusManifest, Decision, Health, Timings, Warnings):
        rec = run.record(cls)
        assert isinstance(rec, cls) and rec.schema_version == SCHEMA_VERSION, cls
    assert run.config["replay"]["arms"] == ["baseline", "head-tail"]
    assert run.manifest.stats["sessions"] == 2
    assert set(run.decision.verdicts) == {"head-tail"}
    assert run.decision.verdicts["head-tail"].verdict in {"ship", "drop", "inconclusive", "untested"}
    assert {"corpus", "replay", "score"} <= set(run.timings.stages())
    assert set(run.metrics["arm"]) == {"baseline", "head-tail"}
    assert max(row["sessions"] for row in run.summary) == 2
    assert not run.decision.summary  # per-(arm, metric) means live in the aggregate
    assert set(run.aggregate["arm"]) == {"baseline", "head-tail"}
    assert len(run.events("baseline")) > 0
