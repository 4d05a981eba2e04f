"""Past one machine (docs/scale.md): shard runs merged give the local run's bytes; merges refuse
missing or foreign shards; call caches join across shards and warm a rerun that sends no call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalkit.cli import main
from tests.support.runs import cache_keys, evalkit_cmd, verdict_script

TINY = """name = "tiny"
seed = {seed}
[corpus]
sessions = {sessions}
session_tokens = 400000  # ~2 compactions a session: enough to split, merge and compare
[replay]
arms = {arms}
workers = 1
[continuation]
workers = 1
[rules]
min_sessions = 2
"""
ARMS = '["baseline", "aa", "head-tail"]'
# Outputs that must not depend on how the run was split (timings and commands may).
SAME = (
    "metrics.parquet",
    "questions.parquet",
    "decision.json",
    "health.json",
    "corpus/sessions.jsonl",
    "corpus/facts.jsonl",
    "corpus/manifest.json",
    "events/baseline.jsonl",
    "events/aa.jsonl",
    "events/head-tail.jsonl",
    "continuation/metrics.parquet",
    "continuation/log.jsonl",
)


def write_config(path: Path, seed: int = 20261130, sessions: int = 4, arms: str = ARMS) -> Path:
    path.write_text(TINY.format(seed=seed, sessions=sessions, arms=arms))
    return path


def assert_same_outputs(a: Path, b: Path) -> None:
    for name in SAME:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """A local run, and the same config as 3 shards on the local executor (which merges them into
    ``sharded/``); ``s1..s3`` are its shard folders (the same as ``evalkit run --shard K/3``)."""
    d = tmp_path_factory.mktemp("scale")
    cfg = write_config(d / "exp.toml")
    assert main(["run", "--config", str(cfg), "--run-dir", str(d / "local")]) == 0
    argv = [
        "run",
        "--config",
        str(cfg),
        "--executor",
        "local",
        "--shards",
        "3",
        "--run-dir",
        str(d / "sharded"),
    ]
    assert main(argv) == 0
    for k in (1, 2, 3):
        (d / f"s{k}").symlink_to(d / "sharded" / "shards" / f"shard-{k}-of-3")
    return d, cfg


@pytest.mark.slow
def test_three_shards_merged_equal_the_local_run(sharded):
    d, _ = sharded
    shards = [json.loads((d / f"s{k}" / "shard.json").read_text()) for k in (1, 2, 3)]
    # Each shard ran its own sessions only: 4 sessions dealt 2/1/1, together the local corpus.
    assert [len(s["sessions"]) for s in shards] == [2, 1, 1]
    local_ids = [r["id"] for r in json.loads((d / "local/corpus/manifest.json").read_text())["sessions"]]
    assert sorted(i for s in shards for i in s["sessions"]) == sorted(local_ids)
    assert not (d / "s1" / "decision.json").exists()  # decide runs after the merge
    assert_same_outputs(d / "local", d / "sharded")  # the local executor's own merge
    # Shards given in any order merge to the same bytes.
    assert main(["merge", str(d / "s3"), str(d / "s1"), str(d / "s2"), "--out", str(d / "merged")]) == 0
    assert_same_outputs(d / "local", d / "merged")
    dec = json.loads((d / "merged/decision.json").read_text())
    assert dec["verdicts"] and (d / "merged/report/report.md").is_file()


@pytest.mark.slow
def test_the_shards_aggregates_merge_into_the_local_runs_and_questions_are_not_metrics(sharded):
    """Merging the aggregates of the shards gives the unsharded run's (counts exactly, sums to
    float rounding); exam questions are in their own table, never metric names."""
    import pyarrow.parquet as pq

    from evalkit.contracts import aggregate, questions
    from evalkit.contracts.metrics import question_family

    d, _ = sharded
    local = aggregate.load(d / "local")
    assert (d / "local" / aggregate.AGGREGATE_FILE).is_file()
    assert local.num_rows and local.equals(aggregate.build(d / "local" / "metrics.parquet"))
    merged = aggregate.merge(*(aggregate.load(d / f"s{k}") for k in (1, 2, 3))).to_pandas()
    want = local.to_pandas()
    assert merged[aggregate.KEYS].equals(want[aggregate.KEYS])
    for c in ("rows", "errors", "n", "not01"):
        assert merged[c].tolist() == want[c].tolist(), c
    for c in ("sum", "sumsq", "min", "max"):
        assert merged[c].to_numpy() == pytest.approx(want[c].to_numpy(), rel=1e-12, nan_ok=True), c
    names = set(
        pq.read_table(d / "local" / "metrics.parquet", columns=["metric"]).column("metric").to_pylist()
    )
    assert not [m for m in names if question_family(m) is not None]
    asked = questions.read(d / "local")
    assert len(asked) and set(asked["exam"]) >= {"identifier", "judge_offline"}
    assert (asked["grade"].isna() == asked["error"].notna()).all()  # an error has no grade, never a 0


@pytest.mark.slow
def test_merge_refuses_a_missing_or_foreign_shard_with_exit_2(sharded, tmp_path, capsys):
    d, _ = sharded
    assert main(["merge", str(d / "s1"), str(d / "s3"), "--out", str(tmp_path / "m1")]) == 2
    assert "missing shard(s) 2/3" in capsys.readouterr().err
    # A real shard of another config (another seed).
    other = write_config(tmp_path / "other.toml", seed=7, sessions=3, arms='["baseline"]')
    assert (
        main(["run", "--config", str(other), "--shard", "2/3", "--run-dir", str(tmp_path / "foreign")]) == 0
    )
    assert (
        main(
            ["merge", str(d / "s1"), str(tmp_path / "foreign"), str(d / "s3"), "--out", str(tmp_path / "m2")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "foreign" in err and "shard of another config" in err
    # An unfinished shard (killed before its marker) is named too.
    half = tmp_path / "half"
    shutil.copytree(d / "s2", half)
    (half / "shard.json").unlink()
    assert main(["merge", str(d / "s1"), str(half), str(d / "s3"), "--out", str(tmp_path / "m3")]) == 2
    assert "half: unfinished" in capsys.readouterr().err
    assert not (tmp_path / "m1" / "decision.json").exists()


FAKE = """name = "cachetest"
seed = 7
[corpus]
sessions = 3
session_tokens = 200000  # ~5 compactions a session at this window: ~240 calls in all
[replay]
arms = ["baseline", "head-tail"]
window = 40000
reserve = 4000
keep_recent = 5000
workers = 1
[model]
backend = "openai"
model = "fake-model"
base_url = "{url}"
timeout = 10.0
[continuation]
workers = 1
[rules]
min_sessions = 2
"""


def assert_same_outputs_of(a: Path, b: Path, names: list[str]) -> None:
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.slow
def test_a_killed_shard_retried_and_shard_caches_merged_give_the_one_piece_run(tmp_path, fake_server_process):
    """A shard killed mid-run and retried with --resume sends no completed call again; each
    shard plans and caches its own sessions; `cache merge` and `merge` join the shards' caches;
    a one-piece run warmed from the joined cache (read, never written) sends nothing and gives
    the merged run's bytes: nothing was counted twice or lost.

    One test for two stories that need the same two shard runs against the fake endpoint: the
    kill must hit a real process (its own process group, so its workers die with it); the retry
    and the other shard run in this process, as run_cli runs ``evalkit run``."""
    import os
    import signal
    import subprocess
    import time

    from evalkit.testing.serverlog import read_log, settled_log
    from tests.support.cli import run_cli

    url, log = fake_server_process(
        "--no-bodies", "--latency", "0.01", "--script", str(verdict_script(tmp_path))
    )
    cfg = tmp_path / "exp.toml"
    cfg.write_text(FAKE.format(url=url))
    key = {"OPENAI_API_KEY": "sk-test-not-a-secret"}
    s1 = tmp_path / "s1"
    args = ("run", "--config", str(cfg), "--shard", "1/2", "--run-dir", str(s1), "--resume")
    p = subprocess.Popen(
        evalkit_cmd(*args),
        env={**os.environ, **key},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 180
    while len(cache_keys(s1 / "model-calls.sqlite")) < 20 and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "the shard finished before it could be killed; make it longer"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    settled_log(log, quiet=1.0)
    before = cache_keys(s1 / "model-calls.sqlite")
    n_log = len(read_log(log))
    assert len(before) >= 20 and not (s1 / "shard.json").exists()
    # The retry: the same command with --resume (what the local and Ray executors do).
    done = run_cli(*args, env=key)
    assert done.returncode == 0, done.stderr
    resent = [e for e in read_log(log)[n_log:] if e["key"] in before]
    assert resent == []  # no completed model call was sent again
    done = run_cli("run", "--config", str(cfg), "--shard", "2/2", "--run-dir", str(tmp_path / "s2"), env=key)
    assert done.returncode == 0, done.stderr
    sent = len(read_log(log))
    per_shard = [len(cache_keys(tmp_path / f"s{k}" / "model-calls.sqlite")) for k in (1, 2)]
    assert min(per_shard) > 0 and sent >= sum(per_shard)
    # Each shard's plan is made from the shard's own corpus (after its corpus stage), not the whole.
    planned = [json.loads((tmp_path / f"s{k}" / "plan.json").read_text())["sessions"] for k in (1, 2)]
    assert planned == [2, 1]
    # Each shard wrote its own cache; `cache merge` joins them (run folders stand for their cache).
    shared = tmp_path / "shared" / "calls.sqlite"
    argv = ["cache", "merge", str(tmp_path / "s1"), str(tmp_path / "s2" / "model-calls.sqlite")]
    assert main([*argv, "--out", str(shared)]) == 0
    assert len(cache_keys(shared)) == sum(per_shard)  # different sessions, different calls
    assert main(["merge", str(s1), str(tmp_path / "s2"), "--out", str(tmp_path / "merged")]) == 0
    merged_cache = tmp_path / "merged" / "model-calls.sqlite"
    calls = json.loads((tmp_path / "merged" / "model-calls.json").read_text())["calls"]
    assert calls == sum(per_shard) == len(cache_keys(merged_cache))
    assert cache_keys(merged_cache) == cache_keys(shared)  # the run merge joins the caches as `cache merge`
    # The same config run in one piece, warmed from the joined cache, sends no call and agrees
    # byte for byte; the cache it read is unchanged, and nothing was written beside it.
    before_bytes = shared.read_bytes()
    one = tmp_path / "one"
    done = run_cli("run", "--config", str(cfg), "--run-dir", str(one), "--warm-cache", str(shared), env=key)
    assert done.returncode == 0, done.stderr
    assert len(read_log(log)) == sent
    assert shared.read_bytes() == before_bytes and sorted(p.name for p in shared.parent.iterdir()) == [
        "calls.sqlite"
    ]
    assert_same_outputs_of(
        tmp_path / "merged",
        one,
        ["metrics.parquet", "decision.json", "events/baseline.jsonl", "events/head-tail.jsonl"],
    )


@pytest.mark.slow
def test_ray_executor_gives_the_local_run(sharded, tmp_path):
    """Shards as Ray tasks on a local Ray instance (num_cpus=2); skipped without ``evalkit[ray]``."""
    ray = pytest.importorskip("ray")
    d, cfg = sharded
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        argv = [
            "run",
            "--config",
            str(cfg),
            "--executor",
            "ray",
            "--shards",
            "3",
            "--run-dir",
            str(tmp_path / "ray"),
        ]
        assert main(argv) == 0
    finally:
        ray.shutdown()
    assert_same_outputs(d / "local", tmp_path / "ray")
    assert sorted(p.name for p in (tmp_path / "ray" / "shards").iterdir()) == [
        f"shard-{k}-of-3" for k in (1, 2, 3)
    ]
