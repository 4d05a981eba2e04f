"""Replay invariants as probes: over the limit, text lost unseen, tool pairing, and carried texts sent exactly once."""

from __future__ import annotations

from evalkit.score.base import ProbeInput, ProbeValue, probe, share


@probe(
    "over_limit",
    "the context after compaction is above the window: the session is dead",
    metrics={"over_limit": "lower"},
    catches="compaction that cannot bring the context under the limit; every request 400s (seed 004)",
    needs_summary=False,
)
def over_limit(inp: ProbeInput) -> list[ProbeValue]:
    """Replay's ``over_limit`` invariant, or ``tokens_after > window`` when replay did not set it."""
    ev = inp.event
    return [ProbeValue("over_limit", float(ev.invariants.over_limit or ev.tokens_after > ev.window))]


@probe(
    "lost_chars",
    "characters that left the view unseen by any summarizer, not kept, not carried",
    metrics={"lost_chars": "lower", "truncated_chars": "info"},
    catches="content deleted without ever being shown to a summarizer (seed 003)",
    needs_summary=False,
)
def lost_chars(inp: ProbeInput) -> list[ProbeValue]:
    """Replay's ``lost_chars`` invariant, and ``truncated_chars``: characters the summarizer's
    re-render cut by policy (the 2,000-character tool-output cut), which are not lost content."""
    ev = inp.event
    return [
        ProbeValue("lost_chars", float(ev.invariants.lost_chars)),
        ProbeValue("truncated_chars", float(ev.truncated_chars)),
    ]


@probe(
    "tool_pairs_valid",
    "every tool call in the new context is answered by exactly one result",
    metrics={"tool_pairs_valid": "higher"},
    catches="tool results left without their calls after compaction (provider 400s)",
    needs_summary=False,
)
def tool_pairs_valid(inp: ProbeInput) -> list[ProbeValue]:
    """Replay's ``tool_pairs_valid`` invariant as 1/0."""
    return [ProbeValue("tool_pairs_valid", float(inp.event.invariants.tool_pairs_valid))]


def request_text(event) -> str:
    """The literal text of an event's summarizer request: system prompt and the literal parts of
    the user prompt (previous summary, earlier carried blocks, instructions).

    Replay stores the rest of the prompt as spans of recorded messages. Carried texts are made
    by compactors from messages that already left the view, so they can only reach a later
    summarizer through the literal parts; the spans need not be re-rendered to check them."""
    parts: list[str] = []
    for m in (event.request or {}).get("messages", []):
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, dict):
            parts.extend(p for p in c.get("parts", []) if isinstance(p, str))
    return "\n".join(parts)


@probe(
    "carry_once",
    "each carried text is in the next request exactly once and in no later summarizer request",
    metrics={
        "carry_once": "higher",
        "carry_missing": "lower",
        "carry_duplicated": "lower",
        "carry_resummarized": "lower",
    },
    catches="carried texts duplicated, dropped, or paraphrased by later summarizers (seed 002)",
)
def carry_once(inp: ProbeInput) -> list[ProbeValue]:
    """For each non-empty carried text: occurrences in the new context (the next request the
    model reads) and presence in any later event's summarizer request. ``carry_once`` = share
    with exactly one occurrence and absent from every later summarizer request."""
    texts = [t for t in inp.event.carried if t and t.strip()]
    if not texts:
        return []
    visible = inp.visible_text()
    arm = inp.event.arm
    later = [
        inp.view.memo(("request_text", arm, e.event, e.replicate), lambda e=e: request_text(e))
        for e in inp.later
    ]
    counts = [visible.count(t) for t in texts]
    resum = [any(t in r for r in later) for t in texts]
    return [
        ProbeValue("carry_once", share([c == 1 and not r for c, r in zip(counts, resum, strict=True)])),
        ProbeValue("carry_missing", share([c == 0 for c in counts])),
        ProbeValue("carry_duplicated", share([c > 1 for c in counts])),
        ProbeValue("carry_resummarized", share(resum)),
    ]
