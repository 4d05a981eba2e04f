"""Summarizer requests stored by recipe, rebuilt exactly from the session.

A summarizer request is large (the rendered head, ~100 KB) while everything in it but a few
literals is a render of recorded messages. An event therefore stores the request with the user
prompt as ``{"parts": [...]}``: literal strings, ``{"span": [first_id, last_id], "as": variant}``
(the renders of the session's messages from first to last, recorded compaction markers
excepted, joined by a blank line) and ``{"stub": id, "as": variant, "room": n}`` (a
render cut to ``n`` characters with the ``[truncated]`` marker, seed 003).
:func:`resolve_request` rebuilds the exact :class:`ChatRequest`; its ``key()`` equals the
event's ``request_key`` (the model-call cache key), which the tests check.
"""

from __future__ import annotations

from typing import Any

from evalkit.contracts.event import Event
from evalkit.contracts.session import Compaction, Session
from evalkit.models import ChatRequest
from evalkit.replay.render import render_message, stub


def request_record(request: ChatRequest, parts: list[Any] | None) -> dict[str, Any]:
    """The event form of a request: its user prompt as parts when it has them."""
    d = request.to_dict()
    if parts is not None:
        d["messages"] = [
            {**m, "content": {"parts": parts}} if m["role"] == "user" else m for m in d["messages"]
        ]
    return d


def assemble(parts: list[Any], session: Session) -> str:
    """The prompt text the parts describe."""
    msgs = [m for m in session.messages if not any(isinstance(b, Compaction) for b in m.blocks)]
    index = {m.id: i for i, m in enumerate(msgs)}
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif "span" in part:
            a, b = (index[i] for i in part["span"])
            out.append("\n\n".join(render_message(m, part["as"]).text for m in msgs[a : b + 1]))
        else:
            out.append(stub(render_message(msgs[index[part["stub"]]], part["as"]), part["room"]).text)
    return "".join(out)


def resolve_request(event: Event, session: Session) -> ChatRequest | None:
    """The exact summarizer request of an event (None when the arm called no summarizer)."""
    if event.request is None:
        return None
    d = dict(event.request)
    msgs = tuple(
        {**m, "content": assemble(m["content"]["parts"], session)} if isinstance(m["content"], dict) else m
        for m in d.pop("messages")
    )
    d["tools"] = tuple(d.get("tools", ()))
    return ChatRequest(messages=msgs, **d)
