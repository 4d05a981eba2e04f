"""Reading a chat completion: the answer, its usage and cost, or why it is not an answer.

The JSON is read as it is, not through the SDK's ``ChatCompletion`` model: building that model
was 14% of the client's CPU per request at 256 in flight (``models-latency`` bench, py-spy), for
the handful of fields read here. Direct answers and batch output lines take the same path.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.models.prices import cost_usd
from evalkit.models.request import ChatRequest, ChatResponse

# Short answers that open like this are refusals, not summaries.
_REFUSAL = re.compile(
    r"^\s*(?:I'?m sorry|I am sorry|Sorry|I apologi[sz]e)?[,.!\s]*(?:but\s+)?I\s*(?:can(?:no|')t|cannot|won'?t|am unable to|'m unable to|am not able to)\b",
    re.I,
)


# Token counts are 64-bit signed integers in SQLite and every price formula; an endpoint's count
# outside [0, 2^63) is not a count.
MAX_COUNT = 2**63 - 1
# An answer may not be longer than this many characters per token of its max_tokens: a token is
# a few characters (the longest tokens of current vocabularies, runs of spaces, are well under
# 32), so a longer answer is not what was asked for.
CHARS_PER_TOKEN_MAX = 32


def is_refusal(text: str) -> bool:
    """A short answer that declines the task (long texts that merely contain "I can't" are kept)."""
    return len(text) < 400 and bool(_REFUSAL.match(text))


class Retryable(Exception):
    """A failure worth another attempt (and, with ``fatal``, one that says the endpoint is unusable)."""

    def __init__(self, message: str, retry_after: float | None = None, fatal: str | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.fatal = fatal  # the kind, when this failure says the endpoint itself is unusable


class Malformed(ValueError):
    """A completion without the fields every chat completion has."""


def _field(obj: Any, name: str, kind: type | tuple[type, ...], optional: bool = True) -> Any:
    """``obj[name]`` checked against ``kind`` (None allowed when ``optional``)."""
    value = obj.get(name) if isinstance(obj, dict) else None
    if value is None and optional:
        return None
    if not isinstance(value, kind):
        raise Malformed(f"{name}: expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    return value


def parse_completion(
    completion: dict,
    request: ChatRequest,
    name: str,
    base_url: str,
    prices: dict,
    latency: float,
    batch: bool = False,
) -> ChatResponse:
    """A chat completion (the JSON object, direct or from a batch's output file) as a response;
    raises :class:`Retryable` for what must not be taken as an answer (no choices, refusal, empty),
    and :class:`Malformed` when a field has the wrong type."""
    choices = _field(completion, "choices", list)
    if not choices:
        raise Retryable(f"malformed response from {base_url}: no choices")
    choice = choices[0]
    msg = _field(choice, "message", dict, optional=False)
    usage, usage_error = read_usage(completion.get("usage"))
    served = completion.get("model") if isinstance(completion.get("model"), str) else None
    tool_calls = []
    for tc in _field(msg, "tool_calls", list) or []:
        fn = _field(tc, "function", dict, optional=False)
        tool_calls.append(
            {
                "id": _field(tc, "id", str),
                "name": _field(fn, "name", str),
                "arguments": _field(fn, "arguments", str),
            }
        )
    text = _field(msg, "content", str)
    finish = _field(choice, "finish_reason", str)
    cost = None if usage_error else cost_usd(prices, request.model, usage, batch)
    fields = {"usage": usage, "usage_error": usage_error, "served_model": served, "latency_s": latency}
    length = len(text or "") + sum(len(tc["arguments"] or "") + len(tc["name"] or "") for tc in tool_calls)
    if request.max_tokens and length > request.max_tokens * CHARS_PER_TOKEN_MAX:
        # Paid for, so not retried; never cached, so never sent back in a later request.
        return ChatResponse(
            None,
            name,
            request.model,
            error=(
                f"oversized answer from {base_url}: {length:,} characters for max_tokens={request.max_tokens}"
                f" (more than {CHARS_PER_TOKEN_MAX} characters per token)"
            ),
            cost_usd=cost,
            finish_reason=finish,
            **fields,
        )
    if finish == "length":
        # A cut-off answer is not a summary (nor a verdict): an error, never cached. Not
        # retried: the same request under the same max_tokens would be cut again.
        return ChatResponse(
            None,
            name,
            request.model,
            error=f"truncated: the answer hit max_tokens={request.max_tokens} (finish_reason=length)",
            finish_reason="length",
            cost_usd=cost,
            **fields,
        )
    refusal = _field(msg, "refusal", str)
    if refusal or finish == "content_filter":
        raise Retryable(f"refusal from the model: {(refusal or text or 'content_filter')[:200]}")
    if text is not None and is_refusal(text):
        raise Retryable(f"refusal from the model: {text[:200]}")
    if not (text or "").strip() and not tool_calls:
        raise Retryable("empty answer from the model")
    return ChatResponse(
        text=text if (text or "").strip() else None,
        backend=name,
        model=request.model,
        tool_calls=tool_calls,
        cost_usd=cost,
        finish_reason=finish,
        **fields,
    )


def _count(counts: dict, name: str) -> int:
    v = counts.get(name)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"usage.{name} = {v!r} is not an integer")
    if not 0 <= v <= MAX_COUNT:
        raise ValueError(f"usage.{name} = {v} is {'negative' if v < 0 else 'over 2^63'}")
    return v


def read_usage(counts: Any) -> tuple[dict[str, int], str | None]:
    """The endpoint's token counts, or ``({}, why)`` when they are not counts (negative, over
    2^63, not integers). An invalid usage keeps the answer but has no cost: a negative count
    would lower the run's cost and free its budget, and one over 2^63 cannot be stored."""
    if counts is None:
        return {}, None
    if not isinstance(counts, dict):
        return {}, f"usage is {type(counts).__name__}, not an object"
    try:
        usage = {
            "prompt_tokens": _count(counts, "prompt_tokens"),
            "completion_tokens": _count(counts, "completion_tokens"),
        }
        # Prompt tokens the provider served from its prefix cache (billed at the cached price).
        details = counts.get("prompt_tokens_details")
        cached = _count(details, "cached_tokens") if isinstance(details, dict) else 0
    except ValueError as e:
        return {}, str(e)
    if cached:
        usage["cached_tokens"] = cached
    return usage, None
