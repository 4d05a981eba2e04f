"""The cost plan against a real run: ``evalkit plan``'s call and token counts are within 10% of
what the run then sends to the fake server (real HTTP, the real openai SDK)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evalkit.contracts.config import load_experiment
from evalkit.corpus import build_corpus
from evalkit.models.usage import read_ledger
from evalkit.pipeline.plan import build_plan, render_plan, write_plan
from evalkit.pipeline.run import run_experiment
from evalkit.testing.serverlog import answered, read_log

# The fake server's echo answer: "[fake-server echo <sha12>] " and up to 400 characters.
ECHO_TOKENS = 106


def write_config(
    tmp_path: Path, url: str, arms=("baseline", "head-tail", "short"), sessions=2, window=40000, **model
) -> Path:
    extra = "".join(
        f"{k} = {v!r}\n".replace("'", '"').replace("True", "true").replace("False", "false")
        for k, v in model.items()
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "exp.toml"
    p.write_text(
        f"""name = "plantest"
seed = 7
[corpus]
kind = "synth"
sessions = {sessions}
[replay]
arms = {list(arms)!r}
window = {window}
reserve = 4000
keep_recent = 5000
workers = 2
[model]
backend = "openai"
model = "fake-model"
base_url = "{url}"
max_retries = 2
{extra}
[model.prices.fake-model]
input = 1.0
cached_input = 0.25
output = 4.0
""".replace("'", '"'),
        encoding="utf-8",
    )
    return p


def actual_by_purpose(run: Path) -> dict[str, tuple[int, int]]:
    """(calls sent, input tokens) per purpose, from the client's own ledger (model-usage.jsonl):
    the cache is not the record of what was sent (a failed call is not kept)."""
    out: dict[str, list[int]] = {}
    for x in read_ledger(run):
        if x.get("outcome") in ("sent", "failed"):
            n_t = out.setdefault(x["purpose"], [0, 0])
            n_t[0] += 1
            n_t[1] += int(x.get("input_tokens") or 0)
    return {p: (n, t) for p, (n, t) in out.items()}


@pytest.mark.slow
def test_plan_within_ten_percent_of_the_run(tmp_path, fake_server_process):
    url, log = fake_server_process("--no-bodies")
    # With the recovery arm: its answers carry a search result and each question costs one more
    # call (purpose "search"), which the plan once left out.
    exp = load_experiment(write_config(tmp_path, url, arms=("baseline", "head-tail", "recover")))
    run = tmp_path / "run"
    plan = build_plan(exp, run, sample=10, summary_tokens=ECHO_TOKENS, answer_tokens=ECHO_TOKENS)
    text = render_plan(plan)
    assert "summarizer" in text and "judge" in text and "summaries 106 tokens (as given)" in text
    assert plan.sampled == plan.sessions == 2
    write_plan(plan, run / "plan.json")  # the run keeps it; the report compares it with the actual calls
    run_experiment(exp, run)
    sent = answered(read_log(log))
    actual = actual_by_purpose(run)
    planned_summ = plan.totals("summarizer")
    planned_judge = plan.totals("judge")
    n_summ, tok_summ = actual["summarize"]
    assert actual["search"][0] > 0
    n_judge = actual["answer"][0] + actual["judge"][0] + actual["search"][0]
    tok_judge = actual["answer"][1] + actual["judge"][1] + actual["search"][1]
    assert abs(planned_summ.requests - n_summ) <= 0.1 * n_summ, (planned_summ.requests, n_summ)
    assert abs(planned_summ.input_tokens - tok_summ) <= 0.1 * tok_summ, (planned_summ.input_tokens, tok_summ)
    assert abs(planned_judge.requests - n_judge) <= 0.1 * n_judge, (planned_judge.requests, n_judge)
    assert abs(planned_judge.input_tokens - tok_judge) <= 0.1 * tok_judge, (
        planned_judge.input_tokens,
        tok_judge,
    )
    # The judge's wall time counts round trips: per event, its answers at once, then its grades.
    # (The echo is no verdict, so each judged event has one judge_overall row, an error row.)
    metrics = pd.read_parquet(run / "metrics.parquet")
    judged = int((metrics["metric"] == "judge_overall").sum())
    assert judged > 0 and abs(planned_judge.trips - 2 * judged) <= 0.1 * 2 * judged, (
        planned_judge.trips,
        judged,
    )
    procs = plan.assumptions["score_workers"]  # scoring processes share the round trips
    assert plan.wall_s["judge"] == -(-planned_judge.trips // procs) * plan.assumptions["latency_s"]
    # Every planned call was sent once: the server answered exactly the calls the cache holds.
    assert len(sent) == n_summ + n_judge
    assert plan.totals().cost_usd > 0
    report = (run / "report" / "report.md").read_text()
    section = report.split("## Cost: planned vs actual", 1)[1].split("\n## ", 1)[0]
    row = next(ln for ln in section.splitlines() if ln.startswith("| summarizer"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{planned_summ.requests:,}" and cells[2] == f"{n_summ:,}"
    assert cells[4] == f"{tok_summ:,}" and cells[9].startswith("$") and cells[10].startswith("$")
    assert int(cells[6].replace(",", "")) > 0  # the fake server's prefix cache answered cached_tokens


def test_plan_counts_cached_calls(tmp_path, fake_server_process):
    """Planned again after the run, every summarizer call is already in the cache: nothing to pay."""
    url, _ = fake_server_process("--no-bodies")
    exp = load_experiment(write_config(tmp_path, url, arms=("baseline",), sessions=1))
    run = tmp_path / "run"
    before = build_plan(exp, run, summary_tokens=ECHO_TOKENS).totals("summarizer")
    run_experiment(exp, run)
    after = build_plan(exp, run, summary_tokens=ECHO_TOKENS).totals("summarizer")
    assert before.in_cache == 0 and before.requests > 0
    assert after.in_cache == after.requests == before.requests
    assert after.cost_usd in (None, 0.0)


def test_plan_creates_nothing_in_the_run_folder(tmp_path):
    """Planning a budgeted experiment whose run folder does not exist yet leaves it absent."""
    exp = load_experiment(
        write_config(tmp_path, "http://127.0.0.1:9/v1", arms=("baseline",), sessions=1, max_calls=3)
    )
    run = tmp_path / "never"
    assert build_plan(exp, run).totals("summarizer").requests > 0
    assert not run.exists()


def test_plan_takes_the_facts_the_run_will_score_with(tmp_path):
    """In a run folder holding a corpus, the plan reads the corpus's facts (what scoring reads)
    instead of computing them again: with the constraints taken out of ``facts.jsonl``, the judge's
    decision questions (one per constraint) leave the plan."""
    exp = load_experiment(write_config(tmp_path, "http://127.0.0.1:9/v1", arms=("baseline",), sessions=1))
    run = tmp_path / "run"
    build_corpus(exp.config.corpus, exp.seed, run / "corpus", workers=1)
    full = build_plan(exp, run).totals("judge").requests
    facts = run / "corpus" / "facts.jsonl"
    rows = [json.loads(x) for x in facts.read_text().splitlines()]
    assert all(r["constraints"] for r in rows)
    facts.write_text("".join(json.dumps({**r, "constraints": []}) + "\n" for r in rows))
    fewer = build_plan(exp, run).totals("judge").requests
    assert 0 < fewer < full, (fewer, full)


def test_wall_time_shares_judge_round_trips_and_agent_calls_among_their_processes():
    from evalkit.pipeline.plan.estimate import Line, Plan, wall_time

    lines = [
        Line("a", "summarizer", requests=12, rounds=5),
        Line("a", "judge", requests=40, trips=7),
        Line("b", "judge", requests=40, trips=3),
        Line("a", "agent", requests=9),
    ]
    assumptions = {
        "batch": False,
        "concurrency": 16,
        "replay_workers": 4,
        "score_workers": 2,
        "agent_workers": 3,
    }
    wall = wall_time(Plan("x", "openai", "m", 1, 1, lines, assumptions), 20.0)
    # summarizer: 12 calls over 4 workers, but 5 rounds one after another; judge: 10 round trips
    # over 2 processes; agent: 9 calls over 3 processes.
    assert wall == {"summarizer": 100.0, "judge": 100.0, "agent": 60.0}
