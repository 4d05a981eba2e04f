"""The prefix-cache-aware summarizer request layout (``[replay] request_layout = "prefix"``): the
same parts as the reference layout, shared parts first and each arm's instructions last, and a
larger share of input tokens that is a prefix another request shares (measured by the plan)."""

from __future__ import annotations

import json

import pytest

from evalkit.contracts.config import CorpusConfig, ModelConfig, ReplayConfig, load_experiment
from evalkit.contracts.session import session_from_dict
from evalkit.pipeline.plan import build_plan
from evalkit.replay import replay_corpus
from evalkit.replay.prompt import PREFIX_SYSTEM, SYSTEM_PROMPT
from evalkit.replay.requests import resolve_request
from tests.pipeline.test_plan import ECHO_TOKENS, write_config

ARMS = ("baseline", "state-sections", "short")


def _plan_share(tmp_path, url, layout: str) -> float:
    cfg = write_config(tmp_path / layout, url, arms=ARMS, sessions=1)
    cfg.write_text(cfg.read_text().replace("[replay]\n", f'[replay]\nrequest_layout = "{layout}"\n'))
    t = build_plan(load_experiment(cfg), tmp_path / layout / "run", summary_tokens=ECHO_TOKENS).totals(
        "summarizer"
    )
    return t.shared_prefix_tokens / t.input_tokens


def test_prefix_layout_raises_the_shared_prefix_share(tmp_path):
    url = "http://127.0.0.1:9/v1"  # never called: the plan sends nothing
    before, after = _plan_share(tmp_path, url, "reference"), _plan_share(tmp_path, url, "prefix")
    assert after > before + 0.2, (before, after)


def test_prefix_layout_requests_keep_every_part_and_rebuild_exactly(tmp_path, fake_server_process):
    url, _ = fake_server_process("--no-bodies")
    from evalkit.corpus import build_corpus

    build_corpus(CorpusConfig(sessions=1), 7, tmp_path / "corpus", workers=1)
    model = ModelConfig(
        backend="openai", model="fake-model", base_url=url, cache_path=str(tmp_path / "c.sqlite")
    )
    replay = {"arms": list(ARMS), "window": 40_000, "reserve": 4_000, "keep_recent": 5_000, "workers": 1}
    replay_corpus(
        tmp_path / "corpus", tmp_path / "run", ReplayConfig(**replay, request_layout="prefix"), model
    )
    session = session_from_dict(
        json.loads((tmp_path / "corpus" / "sessions.jsonl").read_text().splitlines()[0])
    )
    events = [
        json.loads(x) for x in (tmp_path / "run" / "events" / "baseline.jsonl").read_text().splitlines()
    ]
    from evalkit.contracts.event import Event

    later = [Event.from_dict(e) for e in events if e["round"] > 1 and e["request"]]
    assert later
    for e in [Event.from_dict(events[0]), later[0]]:
        req = resolve_request(e, session)
        system, user = (m["content"] for m in req.messages)
        assert system == PREFIX_SYSTEM
        assert (
            f"<instructions>\n{SYSTEM_PROMPT}\n</instructions>" in user
        )  # the baseline's instructions, whole
        # instructions after the conversation; in later rounds the new activity before the earlier summary
        assert user.index("</new-activity>" if e.round > 1 else "</conversation>") < user.index(
            "<instructions>"
        )
        if e.round > 1:
            assert user.index("</new-activity>") < user.index("<previous-summary>")
        from evalkit.models.client import build_client

        assert build_client(model).key(req) == e.request_key


def test_prefix_layout_refuses_the_offline_standin(tmp_path):
    from evalkit.corpus import build_corpus

    build_corpus(CorpusConfig(sessions=1), 7, tmp_path / "corpus", workers=1)
    replay = {"arms": ["baseline"], "window": 40_000, "reserve": 4_000, "keep_recent": 5_000, "workers": 1}
    with pytest.raises(ValueError, match="offline stand-in"):
        replay_corpus(
            tmp_path / "corpus",
            tmp_path / "run",
            ReplayConfig(**replay, request_layout="prefix"),
            ModelConfig(backend="extractive"),
        )
