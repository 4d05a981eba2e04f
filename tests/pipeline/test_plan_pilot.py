"""Issue 39, "the plan within 10% of the actual requests and dollars": without lengths given by
hand the plan assumed max_tokens for every answer (+26% dollars on the default experiment, 4.2x
on real sessions). It now measures them, from the call cache or by a pilot of a few real calls
stored where the run finds them, so the run pays for none of them again. Real HTTP to the fake
server (a subprocess), prices set in the experiment."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from evalkit.contracts.config import load_experiment
from evalkit.models.usage import read_ledger
from evalkit.pipeline.plan import build_plan, render_plan
from evalkit.pipeline.run import run_experiment
from evalkit.testing.serverlog import read_log
from tests.support.runs import starter_experiment, verdict_script

PRICES = {"input": 1.0, "cached_input": 0.25, "output": 4.0}
FOLDER = "claude-code/daaain-claude-code-log"  # 28 real sessions (the closing note's real corpus)


def posts(log: Path) -> int:
    return sum(e.get("method") == "POST" for e in read_log(log)) if log.exists() else 0


def actual(run: Path) -> tuple[int, float]:
    """Requests the run sent and their dollars, from its own ledger."""
    paid = [x for x in read_ledger(run) if x.get("outcome") in ("sent", "failed")]
    return len(paid), sum(float(x.get("cost_usd") or 0.0) for x in paid)


def plan_and_run(exp, run: Path, log: Path) -> dict:
    """Plan with the pilot, then run: the plan's to-send requests and dollars against the run's."""
    before = posts(log)
    plan = build_plan(exp, run, pilot=4)  # the default sample: every session of a small corpus
    piloted = posts(log) - before
    text = render_plan(plan)
    t = plan.totals()
    run_experiment(exp, run)
    sent = posts(log) - before - piloted
    n, usd = actual(run)
    assert n == sent  # the ledger and the server agree on what the run sent
    return {
        "plan": plan,
        "text": text,
        "piloted": piloted,
        "planned_requests": t.requests - t.in_cache,
        "planned_usd": t.cost_usd,
        "sent": sent,
        "usd": usd,
        "run": run,
    }


def mean_output(run: Path) -> dict[str, float]:
    """The run's mean answer length (completion tokens) per kind, from its ledger."""
    by: dict[str, list[int]] = {}
    for x in read_ledger(run):
        if x.get("outcome") == "sent":
            by.setdefault(x["purpose"], []).append(int(x.get("output_tokens") or 0))
    return {k: sum(v) / len(v) for k, v in by.items() if v}


def within_ten_percent(r: dict) -> None:
    req = r["planned_requests"] / r["sent"] - 1
    usd = r["planned_usd"] / r["usd"] - 1
    print(
        f"plan vs actual: requests {r['planned_requests']} vs {r['sent']} ({req:+.1%}), "
        f"dollars ${r['planned_usd']:.4f} vs ${r['usd']:.4f} ({usd:+.1%}); pilot {r['piloted']} calls"
    )
    assert abs(req) <= 0.10, (r["planned_requests"], r["sent"])
    assert abs(usd) <= 0.10, (r["planned_usd"], r["usd"], r["text"])


@pytest.mark.slow
def test_the_plan_measures_answer_lengths_on_the_default_experiment(tmp_path, fake_server_process):
    def experiment(url: str):
        model = {
            "backend": "openai",
            "model": "fake-model",
            "base_url": url,
            "prices": {"fake-model": PRICES},
        }
        return load_experiment(None, {"corpus": {"sessions": 1}, "model": model})

    url, log = fake_server_process("--no-bodies")
    r = plan_and_run(experiment(url), tmp_path / "planned", log)
    # A pilot of each kind: one arm's calls in the session, at most 12 a kind.
    lengths = r["text"].split("output lengths:", 1)[1].split("\n", 1)[0]
    assert lengths.count("pilot of") == 3 and "upper bound" not in lengths, lengths
    assert 6 <= r["piloted"] <= 4 * 12, r["text"]  # summaries, answers, grades, search queries
    # Nothing the pilot paid for is paid again by the run: no request reached the server twice
    # (the server logs each request's cache key; a run without a plan sends these same requests).
    keys = [e["key"] for e in read_log(log) if e.get("method") == "POST"]
    assert len(keys) == len(set(keys)) == r["piloted"] + r["sent"]
    # The fake server answers each replicate as a sampling endpoint does (its own echo), so the
    # A/A arm's summaries differ from the baseline's and its questions are asked, as planned.
    within_ten_percent(r)

    # Planned again over the run's cache: lengths measured there, nothing sent, nothing to pay.
    before = posts(log)
    again = build_plan(experiment(url), tmp_path / "planned", pilot=4)
    assert posts(log) == before
    assert "measured on" in render_plan(again) and not again.sampling["pilot_calls"]


@pytest.mark.slow
def test_the_plan_measures_answer_lengths_on_real_sessions(tmp_path, transcripts, fake_server_process):
    exp_file = starter_experiment(transcripts, FOLDER, tmp_path / "work")
    assert tomllib.loads(exp_file.read_text())["replay"]["trigger"] == "messages"
    url, log = fake_server_process("--script", str(verdict_script(tmp_path)), "--no-bodies")
    exp_file.write_text(
        exp_file.read_text()
        .replace("# [model]", "[model]")
        .replace('# backend = "openai"', 'backend = "openai"')
        .replace('# model = "your-model"', 'model = "your-model"')
        .replace('# base_url = "http://localhost:8000/v1"', f'base_url = "{url}"')
        + "\n[model.prices.your-model]\ninput = 1.0\ncached_input = 0.25\noutput = 4.0\n"
    )
    # The experiment as `evalkit init` writes it, its A/A arm included.
    assert 'arms = ["baseline", "aa", "my-prompt"]' in exp_file.read_text()
    r = plan_and_run(load_experiment(exp_file), tmp_path / "real", log)
    assert r["piloted"] > 0 and "pilot of" in r["text"]
    # What the pilot measures, the answer lengths, is within 10% of the run's, per kind.
    lengths = r["plan"].sampling["output_lengths"]
    for kind, run_mean in mean_output(r["run"]).items():
        if kind in lengths:
            assert abs(lengths[kind]["tokens"] / run_mean - 1) <= 0.10, (kind, lengths[kind], run_mean)
    # The 28 sessions (about 2 MB x 2 arms) are under the full dry replay's volume: every one is
    # dry-replayed, nothing is scaled, and the plan says so. (A sample of 8 with the pilot's calls
    # scaled up with it was -10.6% off on requests.)
    assert r["plan"].sampled == r["plan"].sessions == 28 and r["plan"].sampling["drawn"] == "all"
    assert "sampling error: none" in r["text"] and "dry-replayed every one of the 28 sessions" in r["text"]
    within_ten_percent(r)
