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
    usage = {}
    counts = _field(completion, "usage", dict)
    if counts is not None:
        usage = {
            "prompt_tokens": int(_field(counts, "prompt_tokens", int) or 0),
            "completion_tokens": int(_field(counts, "completion_tokens", int) or 0),
        }
        # Prompt tokens the provider served from its prefix cache (billed at the cached price).
        details = _field(counts, "prompt_tokens_details", dict) or {}
        if _field(details, "cached_tokens", int):
            usage["cached_tokens"] = int(details["cached_tokens"])
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
    if finish == "length":
        # A cut-off answer is not a summary (nor a verdict): an error, never cached. Not
        # retried: the same request under the same max_tokens would be cut again.
        return ChatResponse(
            None,
            name,
            request.model,
            error=f"truncated: the answer hit max_tokens={request.max_tokens} (finish_reason=length)",
            usage=usage,
            latency_s=latency,
            finish_reason="length",
            cost_usd=cost_usd(prices, request.model, usage, batch),
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
        usage=usage,
        latency_s=latency,
        tool_calls=tool_calls,
        cost_usd=cost_usd(prices, request.model, usage, batch),
        finish_reason=finish,
    )
