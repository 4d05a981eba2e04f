"""Size and growth probes: summary tokens, compression, summaries that grow by re-embedding earlier ones, redundant compactions."""

from __future__ import annotations

from evalkit.common.tokens import get_counter
from evalkit.contracts.event import Event
from evalkit.score.base import ProbeInput, ProbeValue, fold_ws, probe


def summary_tokens(inp: ProbeInput, ev: Event, tokenizer: str) -> int:
    return inp.view.memo(
        ("summary_tokens", tokenizer, ev.summary), lambda: get_counter(tokenizer)(ev.summary)
    )


@probe(
    "summary_size",
    "words and tokens of the summary",
    metrics={"summary_words": "lower", "summary_tokens": "lower"},
    catches="summaries that bloat (median 771 → 2,167 words by round five)",
)
def summary_size(inp: ProbeInput, tokenizer: str = "chars4") -> list[ProbeValue]:
    """Size of the summary text alone (carried texts and the splice line excluded)."""
    s = inp.event.summary
    return [
        ProbeValue("summary_words", float(len(s.split()))),
        ProbeValue("summary_tokens", float(summary_tokens(inp, inp.event, tokenizer))),
    ]


@probe(
    "compression",
    "context tokens after the compaction ÷ before it",
    metrics={"compression": "lower"},
    catches="compactions that barely shrink the context (seed 004: 'saved ~5.3k tokens')",
)
def compression(inp: ProbeInput) -> list[ProbeValue]:
    """``tokens_after / tokens_before`` as replay measured them."""
    ev = inp.event
    if ev.tokens_before <= 0:
        return [ProbeValue("compression", None, "tokens_before is 0")]
    return [ProbeValue("compression", ev.tokens_after / ev.tokens_before)]


_MIN_STACK_CHARS = 80  # shorter summaries are too generic for containment to mean re-embedding


def stacked(summary: str, earlier: list[str]) -> bool:
    """Does ``summary`` contain an earlier summary's whole text (whitespace folded)?"""
    s = fold_ws(summary)
    return any(len(e) >= _MIN_STACK_CHARS and e in s for e in (fold_ws(x) for x in earlier))


@probe(
    "growth",
    "summary size by round relative to round 1, and summaries that embed earlier summaries",
    metrics={"summary_growth": "lower", "stacked": "lower", "growth": "lower"},
    catches="summaries compounding round over round until the session 400s (seed 004)",
)
def growth(inp: ProbeInput, tokenizer: str = "chars4") -> list[ProbeValue]:
    """Per event: ``summary_growth`` = summary tokens ÷ the round-1 summary's; ``stacked`` (from
    round 2) = the summary contains an earlier round's whole summary. Per session (event = -1,
    emitted with the arm's last event, sessions with ≥ 2 compactions): ``growth`` = the last
    successful summary's tokens ÷ round 1's. A failed round-1 summary makes the ratios errors."""
    ev = inp.event
    events = [*inp.previous, ev]
    first = events[0]
    out: list[ProbeValue] = []
    base = None if first.summary_error else summary_tokens(inp, first, tokenizer)
    if base:
        out.append(ProbeValue("summary_growth", summary_tokens(inp, ev, tokenizer) / base))
    else:
        out.append(ProbeValue("summary_growth", None, "round-1 summary failed or is empty"))
    if inp.previous:
        earlier = [e.summary for e in inp.previous if not e.summary_error]
        out.append(ProbeValue("stacked", float(stacked(ev.summary, earlier))))
    if inp.is_last and len(events) >= 2:
        good = [e for e in events[1:] if not e.summary_error]
        if not base:
            out.append(ProbeValue("growth", None, "round-1 summary failed or is empty", session_level=True))
        elif not good:
            out.append(ProbeValue("growth", None, "no later summary succeeded", session_level=True))
        else:
            out.append(
                ProbeValue("growth", summary_tokens(inp, good[-1], tokenizer) / base, session_level=True)
            )
    return out


@probe(
    "redundant",
    "a compaction whose first kept message equals the previous compaction's (re-summarized range)",
    metrics={"redundant": "lower"},
    catches="compactions re-summarizing what the previous one already summarized (seed 004)",
)
def redundant(inp: ProbeInput) -> list[ProbeValue]:
    """From round 2 on: 1 when ``first_kept_id`` is the previous event's, else 0. An error when
    either compaction failed without removing anything: it summarized nothing, so "the same
    range again" is the failure showing, not redundancy (its own failure is the scorer's
    ``needs_summary``)."""
    if not inp.previous:
        return []
    if inp.previous[-1].summary_error and not inp.previous[-1].removed_ids:
        return [
            ProbeValue("redundant", None, f"previous compaction failed: {inp.previous[-1].summary_error}")
        ]
    prev = inp.previous[-1].first_kept_id
    return [ProbeValue("redundant", float(prev is not None and inp.event.first_kept_id == prev))]
