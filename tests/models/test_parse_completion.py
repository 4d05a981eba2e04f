"""The chat-completion JSON is read field by field (not through the SDK's model): what it must
accept, and what it must refuse as malformed rather than take as an answer."""

from __future__ import annotations

import pytest

from evalkit.models import ChatRequest
from evalkit.models.completion import Malformed, Retryable, parse_completion

REQ = ChatRequest("m", ({"role": "user", "content": "q"},), max_tokens=50)
PRICES = {"m": {"input": 1.0, "cached_input": 0.1, "output": 2.0}}


def completion(message: dict, finish: str = "stop", usage: dict | None = None) -> dict:
    return {
        "id": "c1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": usage,
    }


def parse(c: dict):
    return parse_completion(c, REQ, "openai", "http://x/v1", PRICES, 0.25)


def test_text_usage_cached_tokens_and_cost():
    usage = {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 800}}
    r = parse(completion({"content": "a summary"}, usage=usage))
    assert (r.text, r.finish_reason, r.latency_s) == ("a summary", "stop", 0.25)
    assert r.usage == {"prompt_tokens": 1000, "completion_tokens": 10, "cached_tokens": 800}
    # 200 fresh input tokens at $1/M, 800 cached at $0.1/M, 10 output at $2/M
    assert r.cost_usd == pytest.approx((200 * 1.0 + 800 * 0.1 + 10 * 2.0) / 1e6)


def test_tool_calls_without_text_are_an_answer():
    call = {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
    r = parse(completion({"content": None, "tool_calls": [call]}, finish="tool_calls"))
    assert r.text is None and r.ok
    assert r.tool_calls == [{"id": "t1", "name": "bash", "arguments": '{"cmd": "ls"}'}]


def test_a_cut_off_answer_is_an_error_not_a_summary():
    r = parse(completion({"content": "half a summ"}, finish="length", usage={"prompt_tokens": 5}))
    assert r.text is None and not r.ok and "max_tokens=50" in r.error
    assert r.usage == {"prompt_tokens": 5, "completion_tokens": 0}


@pytest.mark.parametrize(
    "c, why",
    [
        ({"choices": []}, "no choices"),
        ({}, "no choices"),
        (completion({"content": "  "}), "empty answer"),
        (completion({"content": None, "refusal": "I can't help with that"}), "refusal"),
        (completion({"content": "x"}, finish="content_filter"), "refusal"),
    ],
)
def test_what_is_not_an_answer_is_retried(c, why):
    with pytest.raises(Retryable, match=why):
        parse(c)


@pytest.mark.parametrize(
    "c, field",
    [
        ({"choices": "not a list"}, "choices"),
        ({"choices": [{"finish_reason": "stop"}]}, "message"),
        (completion({"content": 42}), "content"),
        (completion({"content": "x"}, usage={"prompt_tokens": "12"}), "prompt_tokens"),
        (completion({"content": None, "tool_calls": [{"id": "t"}]}), "function"),
    ],
)
def test_a_field_of_the_wrong_type_is_malformed_and_named(c, field):
    with pytest.raises(Malformed, match=field):
        parse(c)
