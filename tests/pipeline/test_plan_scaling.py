"""Issue 39 trap 3: the plan scaled tokens from its sample to the corpus but not dollars, and said
nothing of its sampling error."""

from __future__ import annotations

import pytest

from evalkit.contracts.config import load_experiment
from evalkit.pipeline.plan import build_plan, render_plan
from tests.pipeline.test_plan import write_config


def test_trap3_dollars_scale_with_tokens_and_the_sampling_error_is_stated(tmp_path):
    exp = load_experiment(write_config(tmp_path, "http://127.0.0.1:9/v1", arms=("baseline",), sessions=3))
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
