"""The recovery arm's search: after compaction, one search over the region the compaction removed.

An arm of the ``recover`` family (``evalkit.replay.candidates``) marks its events with
``meta["recovery"]``. When an exam asks such an event a question, the answerer may make one
documented tool call before answering::

    search_removed(query: str) -> str   # passages of the removed messages, at most SEARCH_CHARS

- offline: the query is the question itself, and the search is lexical (the offline judge's BM25
  passage reader, :func:`evalkit.models.offline_judge.answer`, over the removed messages only);
- with a model: the answering model chooses the query (one call, ``purpose="search"``), the
  search is the same lexical one.

The result joins the context inside ``<recovered>`` tags (the tags are harness text, never graded)
and its tokens are charged: per question, the query's and the result's tokens (chars / 4) plus,
with a model, the query call's own input and output tokens. ``exam_search_tokens`` /
``judge_search_tokens`` are their mean per asked question.
"""

from __future__ import annotations

from typing import Any

from evalkit.contracts.config import ModelConfig
from evalkit.score.base import ProbeInput

RECOVERY_META = "recovery"
SEARCH_CHARS = 2000  # about 500 tokens: one search round trip's result
TOOL = {
    "name": "search_removed",
    "description": "Search the part of the conversation the compaction removed; returns the best passages.",
    "parameters": {"query": "keywords to look for"},
}
QUERY_SYSTEM = (
    "Earlier parts of this conversation were removed to save context. You may search them once. "
    "Reply with the search query only: a few keywords that would find what you need to answer."
)


def is_recovery(inp: ProbeInput) -> bool:
    return bool(inp.event.meta.get(RECOVERY_META))


def removed_texts(inp: ProbeInput) -> list[str]:
    """The recorded messages up to the compaction point that are not in the new context as they
    were (removed, or kept only with their outputs masked): the searchable region."""

    def build() -> list[str]:
        keep = {e["ref"] for e in inp.event.new_context if "ref" in e and not e.get("mask")}
        msgs = inp.session.messages
        return [_plain(m) for m in msgs[: inp.event.at_message + 1] if m.id not in keep]

    return inp.memo("recovery-removed", build)


def _plain(m) -> str:
    from evalkit.common.plaintext import message_plain_text

    return f"{m.role}: {message_plain_text(m)}"


def search(inp: ProbeInput, query: str) -> str:
    """The lexical search over the removed region (memoized per event and query, and per removed
    region and query for the session: arms and events that removed the same messages share it)."""
    cache = inp.memo("recovery-search", dict)
    if query not in cache:
        ctx = inp.memo("recovery-context", lambda: _removed_context(inp))
        key = ("recovery-answer", ctx.keys, query, SEARCH_CHARS)
        found = ctx.cache.get(key)
        if found is None:
            from evalkit.models import offline_judge

            found = ctx.cache[key] = offline_judge.answer(query, ctx, SEARCH_CHARS) if len(ctx) else ""
        cache[query] = found
    return cache[query]


def _removed_context(inp: ProbeInput):
    """The removed region as the offline judge reads it, its messages' index shared with the
    judge's reads of the same recorded messages (:class:`evalkit.score.judge_context.SessionContext`)."""
    from evalkit.score.judge_context import SessionContext, session_cache

    texts = removed_texts(inp)
    keep = {e["ref"] for e in inp.event.new_context if "ref" in e and not e.get("mask")}
    index = inp.view.index
    msgs = [
        (i, m) for i, m in enumerate(inp.session.messages[: inp.event.at_message + 1]) if m.id not in keep
    ]
    # A recorded message's id is its key only where the id names this message (ids are unique in
    # an imported session; a repeated one is keyed by its text, apart from the judge's keys).
    keys = tuple(
        m.id if index.get(m.id) == i else ("removed", m.role, t)
        for (i, m), t in zip(msgs, texts, strict=True)
    )
    return SessionContext(keys, texts, session_cache(inp))


def query_request(inp: ProbeInput, question: str, model: str):
    """The call that asks the answering model for its search query (the cost plan builds it too)."""
    from evalkit.models import ChatRequest

    return ChatRequest(
        model=model,
        messages=(
            {"role": "system", "content": QUERY_SYSTEM},
            {
                "role": "user",
                "content": f"<context>\n{inp.visible_text()}\n</context>\n\nQuestion: {question}",
            },
        ),
        max_tokens=40,
        purpose="search",
    )


def recovered_block(inp: ProbeInput, query: str) -> str:
    """What the search for ``query`` adds to the context."""
    return f"\n\n<recovered>\n{search(inp, query)}\n</recovered>"


def _model_query(inp: ProbeInput, question: str, model: ModelConfig) -> tuple[str, int]:
    """The answering model's query and the call's tokens (input + output)."""
    from evalkit.score.base import model_client

    req = query_request(inp, question, model.model)
    resp = model_client(inp)(req)
    if not resp.ok:
        raise RuntimeError(f"search query call failed: {resp.error}")
    usage = getattr(resp, "usage", None) or {}
    spent = int(usage.get("prompt_tokens", 0) or 0) + int(usage.get("completion_tokens", 0) or 0)
    if not spent:  # no usage reported: what was sent and received, chars / 4
        spent = -(-(sum(len(m["content"]) for m in req.messages) + len(resp.text or "")) // 4)
    return (resp.text or "").strip() or question, spent


def recovered(inp: ProbeInput, q: dict[str, Any], model: ModelConfig | None = None) -> tuple[str, int]:
    """What the one search adds to the context for question ``q`` (empty for an arm that does not
    recover) and the tokens it is charged. ``model``: the answering model chooses the query."""
    if not is_recovery(inp):
        return "", 0
    query, spent = (q["text"], 0) if model is None else _model_query(inp, q["text"], model)
    spent += -(-(len(query) + len(search(inp, query))) // 4)
    return recovered_block(inp, query), spent
