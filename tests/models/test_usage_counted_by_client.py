"""Item 6 of issue 19: model calls are counted by the client (requests sent, retries, failures,
cache hits, tokens), per run, and the report reads those counts."""

from __future__ import annotations

import json

import pytest

from evalkit.testing.serverlog import read_log
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, verdict_script, write_experiment


@pytest.mark.slow
def test_requests_retries_failures_and_cache_hits_are_counted_per_run(tmp_path, fake_server_process):
    url, log = fake_server_process(
        "--fault", "500=0.3", "--no-bodies", "--script", str(verdict_script(tmp_path))
    )
    corpus = tiny_corpus(tmp_path / "corpus")
    model = {
        "backend": "openai",
        "model": "m",
        "base_url": url,
        "max_retries": 1,
        "backoff_base": 0.01,
        "backoff_max": 0.02,
    }
    exp = write_experiment(tmp_path / "exp.toml", corpus, model=model)
    run = tmp_path / "run"
    done = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    posts = [e for e in read_log(log) if e["method"] == "POST"]
    u = json.loads((run / "model-usage.json").read_text())["total"]
    assert u["requests"] == len(posts)  # every HTTP request, retries included
    assert u["retries"] == len(posts) - len({e["key"] for e in posts}) > 0
    assert u["failures"] == len(
        {e["key"] for e in posts if all(x["fault"] == "500" for x in posts if x["key"] == e["key"])}
    )
    assert u["failures"] > 0 and u["answered"] > 0 and u["cache_hits"] == 0
    assert u["input_tokens"] > 0

    # A warm rerun into the same folder: nothing sent; every answered call is a cache hit.
    n = len(posts)
    again = run_cli("run", "--config", str(exp), "--run-dir", str(run))
    assert again.returncode == 0, again.stderr
    usage = json.loads((run / "model-usage.json").read_text())
    w = usage["total"]
    posts2 = [e for e in read_log(log) if e["method"] == "POST"][n:]
    assert w["requests"] == len(posts2)
    # Nothing answered before is sent again. (Not every answered call recurs: a summary that
    # failed in the first run and succeeds now changes the prompts of the calls after it.)
    answered_before = {e["key"] for e in posts if e["fault"] is None}
    assert not answered_before & {e["key"] for e in posts2}
    assert w["cache_hits"] > 0
    assert usage["all_runs"]["requests"] == n + len(posts2) and usage["invocations"] == 2
    report = (run / "report" / "report.md").read_text()
    assert f"{w['requests']} requests sent" in report and f"{w['cache_hits']} cache hits" in report
