"""Budgets: a run stopped by ``[model] max_calls`` keeps what it paid for, the gate fails it, and
``--resume`` finishes it with the same metrics as an uninterrupted run and no call paid twice
(counted in the fake server's log)."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd
import pytest

from evalkit.cli import main
from evalkit.contracts.config import load_experiment
from evalkit.contracts.metrics import read_metrics
from evalkit.models.budget import Budget, BudgetExceeded
from evalkit.models.prices import Price
from evalkit.models.request import ChatRequest
from evalkit.models.spending import RunIncomplete, incomplete
from evalkit.pipeline.run import run_experiment
from evalkit.testing.serverlog import answered, read_log
from tests.pipeline.test_plan import write_config
from tests.support.runs import verdict_script


def _metrics(run) -> pd.DataFrame:
    df = read_metrics(run / "metrics.parquet")
    cols = ["arm", "session", "event", "replicate", "metric", "value"]
    return df[cols].sort_values(cols[:5]).reset_index(drop=True)


@pytest.mark.slow
def test_budget_stop_then_resume_matches_an_uninterrupted_run(tmp_path, fake_server_process):
    url_a, log_a = fake_server_process("--no-bodies", "--script", str(verdict_script(tmp_path)))
    exp_a = load_experiment(
        write_config(tmp_path / "a", url_a, arms=("baseline", "head-tail"), sessions=2, window=120_000)
    )
    run_experiment(exp_a, tmp_path / "a" / "run")
    n = len(answered(read_log(log_a)))
    assert n > 20

    url_b, log_b = fake_server_process("--no-bodies", "--script", str(verdict_script(tmp_path)))
    cfg = write_config(
        tmp_path / "b",
        url_b,
        arms=("baseline", "head-tail"),
        sessions=2,  # two sessions: scoring runs in worker processes, and the stop reaches them
        window=120_000,
        max_calls=n // 2 + 2,
    )
    exp_b = load_experiment(cfg)
    run_b = tmp_path / "b" / "run"
    with pytest.raises(RunIncomplete) as stop:
        run_experiment(exp_b, run_b)
    assert stop.value.code == 3 and "stopped (budget" in str(stop.value)
    first = answered(read_log(log_b))
    assert 0 < len(first) <= n // 2 + 2  # stopped before crossing
    record = incomplete(run_b)
    assert record["reason"] == "budget" and record["calls_answered"] == len(first)
    assert re.search(r"the next (answer|judge) call would cross it", record["detail"])  # stopped in scoring
    # The gate fails an incomplete run unless told otherwise.
    assert main(["gate", str(run_b)]) == 1
    run_experiment(exp_b, run_b, resume=True)
    assert incomplete(run_b) is None
    keys = Counter(e["key"] for e in answered(read_log(log_b)))
    assert sum(keys.values()) == n and max(keys.values()) == 1  # zero duplicate paid calls
    pd.testing.assert_frame_equal(_metrics(tmp_path / "a" / "run"), _metrics(run_b))


def test_cost_budget_reserves_the_worst_case_and_settles_to_the_actual(tmp_path):
    price = Price(input=1.0, output=4.0, cached_input=0.25, batch_input=0.5, batch_output=2.0)
    b = Budget(tmp_path / "budget.sqlite", None, 0.01, price)
    b.start()
    req = ChatRequest("m", ({"role": "user", "content": "x" * 4000},), max_tokens=1000)
    # worst case: 1,000 input tokens at $1/M + 1,000 output at $4/M = $0.005
    assert b.reserve(req) == pytest.approx(0.005)
    b.settle(0.005, 0.001)
    assert b.spent().cost_usd == pytest.approx(0.001)
    b.reserve(req)
    with pytest.raises(BudgetExceeded, match=r"max_cost_usd 0\.01"):
        b.reserve(req)  # 0.006 + 0.005 would cross 0.01
    assert b.spent().calls == 2
    b.start()  # a resumed run draws on a fresh budget
    assert b.spent().calls == 0


@pytest.mark.slow
def test_budget_stop_in_the_replay_keeps_the_paid_calls(tmp_path, fake_server_process):
    """A stop in the replay stage (its worker processes share the ledger): no events are written,
    the answered calls are kept, and a resumed run with a higher budget (the same run folder: the
    budget is not part of the config hash) pays for none of them again."""
    url, log = fake_server_process("--no-bodies", "--script", str(verdict_script(tmp_path)))
    cfg = write_config(tmp_path, url, arms=("baseline", "head-tail"), sessions=1, window=120000, max_calls=5)
    exp = load_experiment(cfg)
    run = tmp_path / "run"
    with pytest.raises(RunIncomplete):
        run_experiment(exp, run)
    assert not (run / "events" / "baseline.jsonl").exists()
    first = {e["key"] for e in answered(read_log(log))}
    assert 0 < len(first) <= 5 and all(e.get("purpose") == "summarize" for e in answered(read_log(log)))
    assert incomplete(run)["calls_answered_in_cache"] == len(first)
    cfg.write_text(cfg.read_text().replace("max_calls = 5", "max_calls = 100000"))
    exp2 = load_experiment(cfg)
    assert exp2.hash == exp.hash
    run_experiment(exp2, run, resume=True)
    keys = Counter(e["key"] for e in answered(read_log(log)))
    assert first <= set(keys) and max(keys.values()) == 1
