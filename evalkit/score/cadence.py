"""Cadence and cost per compaction: how often an arm compacts, what each cycle frees, and loops.

A compaction *loops* when it comes within ``min_turns`` assistant turns of the arm's previous one
or frees less than ``min_freed`` of the context it compacted: the harness is re-compacting rather
than making room (observation masking under a message-count trigger keeps every message, so the
count never drops and it fires again at the next turn; users report 48 automatic compactions in
76 minutes in a real agent). Per event the probe also records the tokens kept (the scorecard's
x axis) and the summarizer's calls and tokens; once per (session, arm) the compactions per 100k
tokens of work. The ceiling arm (``uncompacted``) makes no compactions and gets no cadence rows.
"""

from __future__ import annotations

from evalkit.common.tokens import message_tokens
from evalkit.score.base import ProbeInput, ProbeValue, probe


def _assistant_turns(inp: ProbeInput, start: int, end: int) -> int:
    """Assistant messages with index in (start, end]."""
    msgs = inp.session.messages
    return sum(1 for m in msgs[start + 1 : end + 1] if m.role == "assistant")


def work_tokens(inp: ProbeInput) -> int:
    """Tokens of the whole recorded session (chars/4): the work the compactions served."""
    return inp.view.memo(
        ("work_tokens",), lambda: sum(message_tokens(m, "chars4") for m in inp.session.messages)
    )


def request_tokens(ev) -> int:
    """The summarizer request's size in tokens (chars/4); 0 for no call. Events store the
    conversation part as a recipe of spans, whose rendered size is ``source_chars``."""
    if not ev.request:
        return 0
    chars = ev.source_chars
    for m in ev.request.get("messages") or []:
        content = m.get("content")
        parts = content.get("parts", []) if isinstance(content, dict) else [content]
        chars += sum(len(x) for x in parts if isinstance(x, str))
    return -(-chars // 4)


def compactions(inp: ProbeInput) -> list:
    """The arm's compaction events of this session (the ceiling's non-compactions excluded)."""
    return [e for e in [*inp.previous, inp.event, *inp.later] if not e.meta.get("uncompacted")]


@probe(
    "cadence",
    "how often an arm compacts and what each cycle frees and costs; flags re-compaction loops",
    metrics={
        "loop": "lower",
        "context_freed": "higher",
        "turns_between": "info",
        "tokens_kept": "info",
        "summarizer_calls": "info",
        "summarizer_input_tokens": "info",
        "summarizer_output_tokens": "info",
        "compactions_per_100k": "lower",
        "loop_share": "lower",
    },
    catches="compaction loops (re-compacting every turn while freeing nothing) and costly cadences",
    needs_summary=False,
)
def cadence(inp: ProbeInput, min_freed: float = 0.10, min_turns: int = 2) -> list[ProbeValue]:
    """Per event: ``loop`` (1: within ``min_turns`` turns of the previous compaction or freeing
    less than ``min_freed`` of the context), ``context_freed``, ``turns_between`` (since the
    previous compaction, or the session start), ``tokens_kept`` and the summarizer's calls and
    tokens. At the arm's last event of the session: ``compactions_per_100k`` tokens of work and
    ``loop_share`` (the share of its compactions that loop)."""
    ev = inp.event
    if ev.meta.get("uncompacted"):
        return [ProbeValue("tokens_kept", ev.tokens_after)]
    evs = compactions(inp)
    k = len(evs) - 1 - len([e for e in inp.later if not e.meta.get("uncompacted")])
    start = evs[k - 1].at_message if k else -1
    turns = _assistant_turns(inp, start, ev.at_message)
    looped = _loops(inp, evs, k, min_freed, min_turns)
    called = ev.request is not None
    out = [
        ProbeValue("loop", float(looped)),
        ProbeValue("context_freed", _freed(ev)),
        ProbeValue("turns_between", turns),
        ProbeValue("tokens_kept", ev.tokens_after),
        ProbeValue("summarizer_calls", float(called)),
        ProbeValue("summarizer_input_tokens", request_tokens(ev)),
        ProbeValue("summarizer_output_tokens", ev.summary_tokens if called else 0),
    ]
    if inp.is_last:
        work = work_tokens(inp)
        out.append(
            ProbeValue("compactions_per_100k", len(evs) / work * 100_000 if work else None, None, True)
        )
        flags = [_loops(inp, evs, k, min_freed, min_turns) for k in range(len(evs))]
        out.append(ProbeValue("loop_share", sum(flags) / len(flags), None, True))
    return out


def _freed(ev) -> float:
    """The share of the context this compaction freed."""
    return (ev.tokens_before - ev.tokens_after) / ev.tokens_before if ev.tokens_before else 0.0


def _loops(inp: ProbeInput, evs: list, k: int, min_freed: float, min_turns: int) -> bool:
    """Does the k-th compaction come too soon after the previous one, or free too little?"""
    if k == 0:
        return False
    turns = _assistant_turns(inp, evs[k - 1].at_message, evs[k].at_message)
    return turns <= min_turns or _freed(evs[k]) < min_freed
