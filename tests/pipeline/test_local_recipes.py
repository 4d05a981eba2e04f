"""The local-model recipes (experiments/local-vllm.toml, local-ollama.toml) run end to end against
the fake server standing in for vLLM / Ollama: summarizer, judge and agent calls all arrive with
the recipe's model name and max tokens. This tests the configs, not vLLM or Ollama themselves."""

from __future__ import annotations

from collections import Counter

import pytest

from evalkit.contracts.config import load_experiment
from evalkit.models.cache import CallCache
from evalkit.pipeline.run import run_experiment
from tests.conftest import ROOT
from tests.support.runs import verdict_script


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["local-vllm.toml", "local-ollama.toml"])
def test_recipe_runs_every_stage_against_an_openai_compatible_endpoint(recipe, tmp_path, fake_server_process):
    url, _ = fake_server_process("--no-bodies", "--script", str(verdict_script(tmp_path)))
    path = ROOT / "experiments" / recipe
    small = {
        "corpus": {"sessions": 1},
        "replay": {"arms": ["baseline", "short"], "workers": 1},
        "model": {"base_url": url, "replicates": 1},
        "continuation": {"max_calls": 2},
    }
    exp = load_experiment(path, small)
    recipe_cfg = load_experiment(path)
    run = tmp_path / "run"
    run_experiment(exp, run)
    rows = [(c["purpose"], c["model"], c["request"]) for c in CallCache(run / "model-calls.sqlite").export()]
    purposes = Counter(p for p, _, _ in rows)
    assert {"summarize", "answer", "judge", "agent"} <= set(purposes), purposes
    assert {m for _, m, _ in rows} == {recipe_cfg.config.model.model}
    summ = [r for p, _, r in rows if p == "summarize"]
    assert {r["max_tokens"] for r in summ} == {recipe_cfg.config.replay.summary_max_tokens}
    assert {r["temperature"] for r in summ} == {0.0}
    agent = [r for p, _, r in rows if p == "agent"]
    assert {r["max_tokens"] for r in agent} == {1024} and all(r["tools"] for r in agent)
    layout = recipe_cfg.config.replay.request_layout
    system = summ[0]["messages"][0]["content"]
    assert ("<instructions>" in summ[0]["messages"][1]["content"]) == (layout == "prefix"), system
