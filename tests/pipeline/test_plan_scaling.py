"""Issue 39 trap 3: the plan scaled tokens from its sample to the corpus but not dollars, and said
nothing of its sampling error."""

from __future__ import annotations

import pytest

from evalkit.contracts.config import load_experiment
from evalkit.pipeline.plan import build_plan, render_plan
from tests.pipeline.test_plan import write_config


def test_trap3_dollars_scale_with_tokens_and_the_sampling_error_is_stated(tmp_path):
    cfg = write_config(tmp_path, "http://127.0.0.1:9/v1", arms=("baseline",), sessions=3)
    # Sessions of a few compactions each at the test's 40,000-token window: cheap to dry-replay.
    cfg.write_text(cfg.read_text().replace("sessions = 3\n", "sessions = 3\nsession_tokens = 90000\n"))
    exp = load_experiment(cfg)
    part = build_plan(exp, tmp_path / "none", sample=2)
    whole = build_plan(exp, tmp_path / "none", sample=3)
    p, w = part.totals(), whole.totals()
    assert part.sampled == 2 and whole.sampled == 3
    # the same price per token whether sampled or not (1656aa3: the sample's dollars, unscaled)
    assert p.cost_usd / p.input_tokens == pytest.approx(w.cost_usd / w.input_tokens, rel=0.25)
    assert p.cost_usd == pytest.approx(w.cost_usd, rel=0.5)
    text = render_plan(part)
    assert "sampling error: ± " in text and "requests, ± $" in text
    assert part.sampling["requests_se"] > 0 and whole.sampling["requests_se"] == 0.0
    assert "sampling error: none" in render_plan(whole)


def test_the_pilots_calls_are_taken_off_the_scaled_total_once():
    """Issue 39: the pilot's calls, all in the sample, were scaled up with it before being taken
    off as cached: -10.6% on the requests of 28 real sessions sampled 8 (x2.8, 36 pilot calls)."""
    from evalkit.pipeline.plan.estimate import Line

    ln = Line("baseline", "judge", requests=30, in_cache=6, cost_usd=3.0, piloted=10, piloted_usd=1.0)
    out = ln.scaled(3.0).settle()
    assert out.requests == 90 and out.in_cache == 3 * 6 + 10  # to send 62 (1656aa3's way: 3 * 14 = 42)
    assert out.cost_usd == pytest.approx(3 * 3.0 - 1.0)


def test_a_small_corpus_is_dry_replayed_whole_and_a_sample_is_drawn_at_random(tmp_path):
    from evalkit.pipeline.plan.sample import sample_sessions
    from tests.support.runs import tiny_corpus, write_experiment

    corpus = tiny_corpus(tmp_path / "corpus", n=4, tokens=12_000)
    exp = load_experiment(write_experiment(tmp_path / "exp.toml", corpus, replay={"arms": ["baseline"]}))
    whole = build_plan(exp, tmp_path / "none")
    assert whole.sampled == whole.sessions == 4 and whole.sampling["drawn"] == "all"
    assert "dry-replayed every one of the 4 sessions" in render_plan(whole)
    part = build_plan(exp, tmp_path / "none", sample=2)
    assert part.sampled == 2 and part.sampling["drawn"] == "random"
    assert "2 of 4 sessions drawn at random" in render_plan(part)
    # Seeded by the experiment: the same sessions each time.
    ids = [[s.id for s in sample_sessions(exp, tmp_path / "none", 2).sessions] for _ in range(2)]
    assert ids[0] == ids[1] and len(set(ids[0])) == 2
    assert not (tmp_path / "none").exists()


def test_a_sessions_size_is_measured_past_the_trigger():
    """Sessions below the trigger send nothing: the sample is scaled by how far past it they go."""
    from evalkit.contracts.config import ReplayConfig
    from evalkit.pipeline.plan.sample import expected_compactions

    by_messages = ReplayConfig(trigger="messages", max_messages=14)
    assert expected_compactions({"messages": 12, "bytes": 9_000}, by_messages) == 0
    assert expected_compactions({"messages": 40, "bytes": 9_000}, by_messages) == 26
    by_tokens = ReplayConfig(window=40_000, reserve=4_000, keep_recent=5_000)
    assert expected_compactions({"messages": 99, "bytes": 4 * 36_000}, by_tokens) == 0
    assert expected_compactions({"messages": 99, "bytes": 4 * 46_000}, by_tokens) == 10_000


def test_a_small_synthetic_corpus_not_yet_built_is_dry_replayed_whole(tmp_path):
    """Before any run a synthetic corpus is generated only as far as the sample; when the sample's
    sizes say the whole fits in the full dry replay's volume, the whole is generated and replayed."""
    replay = {"arms": ["baseline"], "window": 40_000, "reserve": 4_000, "keep_recent": 5_000}
    exp = load_experiment(None, {"corpus": {"sessions": 10, "session_tokens": 3_000}, "replay": replay})
    plan = build_plan(exp, tmp_path / "none")
    assert plan.sampled == plan.sessions == 10 and plan.sampling["drawn"] == "all"
    assert plan.sampling["volume_mb"] < 1
