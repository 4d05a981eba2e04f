"""Identifier recall: exact identifiers that left the view, still visible after the compaction.

An identifier (``Facts.identifiers``: PR numbers, SHAs, URLs, branches, created directories,
symbols, error strings) *left the view* at an event when the message that introduced it is at or
before the compaction point and is no longer in the new context as it was: removed, or kept only
with its tool output masked (observation masking elides rather than summarizes, so what it elided
has left the view too). It is *recalled* when the post-compaction context states it exactly,
bounded so that a longer token containing it does not count: ``a1b2c3d`` is not found inside
the colour ``#a1b2c3d4``, ``#12`` not inside ``#123`` nor as the heading ``# 12``, and a URL may be
followed by sentence punctuation but not by more path.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from evalkit.facts import Identifier
from evalkit.score.base import ProbeInput, ProbeValue, fold_ws, probe
from evalkit.score.textindex import Verify, contains

KINDS = ("pr", "sha", "url", "branch", "dir", "symbol", "error")


def in_view_ids(inp: ProbeInput) -> set[str]:
    """Recorded messages kept in the new context as they were (masked copies excluded)."""
    return inp.memo(
        "in_view_ids",
        lambda: {e["ref"] for e in inp.event.new_context if "ref" in e and not e.get("mask")},
    )


@lru_cache(maxsize=8192)
def _pattern(kind: str, value: str) -> re.Pattern[str]:
    v = re.escape(value)
    if kind == "pr":
        num = re.escape(value.lstrip("#"))
        # "#12", "PR 12", "pull request 12", "issue 12", ".../pull/12": never "# 12" or "#123".
        return re.compile(
            rf"(?<![\w#&])#{num}(?!\d)|\b(?:PR|pull request|issue)[ \t]*#?{num}(?!\d)|/(?:pull|issues)/{num}(?!\d)",
            re.I,
        )
    if kind == "sha":
        # Case-insensitive hex, not part of a longer hex/word run, and not a colour ("#a1b2c3").
        return re.compile(rf"(?<![\w#]){v}(?![\w])", re.I)
    if kind == "url":
        # Sentence punctuation may follow; more path, query or word characters may not.
        return re.compile(rf"{v}(?![\w/?#=&%~+-]|[.,;:!]\w)")
    if kind in ("branch", "dir"):
        return re.compile(rf"(?<![\w./-]){v}(?![\w-]|[./]\w)")
    if kind == "symbol":
        return re.compile(rf"(?<![\w$]){v}(?![\w$])")
    return re.compile(v)  # an error string: the exact text, whitespace folded by the caller


def identifier_visible(
    ident: Identifier | tuple[str, str], text: str, lower: str | None = None, folded: str | None = None
) -> bool:
    """Is the identifier stated exactly in ``text`` (an error string with whitespace folded)?
    ``lower`` and ``folded`` are ``text`` lower-cased and whitespace-folded, when the caller has
    them (a probe asks for many identifiers against one large context)."""
    kind, value = (ident.kind, ident.value) if isinstance(ident, Identifier) else ident
    if not value:
        return False
    if kind == "error":
        return fold_ws(value) in (fold_ws(text) if folded is None else folded)
    needle, verify = _search(kind, value)
    return contains(text.lower() if lower is None else lower, needle, verify, text)


@lru_cache(maxsize=8192)  # asked per identifier per event: ~120 identifiers at each event
def _search(kind: str, value: str) -> tuple[str, Verify]:
    """What to look for in lower-cased text (a PR's number; any other value lower-cased) and how
    to check an occurrence in the original text: the bounded regex runs only around each
    occurrence, since a regex search over a whole large context per identifier costs milliseconds."""
    needle = value[1:] if kind == "pr" else value.lower()
    pat, width = _pattern(kind, value), len(needle)

    def verify(text: str, at: int) -> bool:
        return pat.search(text, max(0, at - 24), at + width + 8) is not None

    return needle, verify


def visible_in_context(inp: ProbeInput, ident: Identifier) -> bool:
    """:func:`identifier_visible` against the post-compaction context, each kept message searched
    once per session (an error string within one message: none spans two)."""
    if not ident.value:
        return False
    if ident.kind == "error":
        return inp.visible_has(fold_ws(ident.value), "folded")
    needle, verify = _search(ident.kind, ident.value)
    return inp.visible_has(needle, "lower", verify, key=(ident.kind, ident.value))


def left_view(inp: ProbeInput) -> list[Identifier]:
    """Identifiers introduced at or before the compaction point whose message left the view."""
    at, msgs, keep = inp.event.at_message, inp.session.messages, in_view_ids(inp)
    if inp.event.meta.get("uncompacted"):
        keep = set()  # the ceiling arm: every identifier so far is asked for, against the full history
    return [
        i
        for i in inp.facts.identifiers
        if i.message_index <= at and i.message_index < len(msgs) and msgs[i.message_index].id not in keep
    ]


def last_user_text(inp: ProbeInput) -> str:
    """The latest genuine user message at or before the compaction point (what a copying answer
    would repeat)."""
    at, msgs = inp.event.at_message, inp.session.messages
    i = next((k for k in range(min(at, len(msgs) - 1), -1, -1) if msgs[k].is_genuine_user()), None)
    return "" if i is None else msgs[i].text


def question_id(ident: Identifier) -> str:
    """A stable, short per-identifier question id (values may be long URLs or error lines)."""
    return f"{ident.kind}:{hashlib.sha1(ident.value.encode()).hexdigest()[:10]}"


@probe(
    "identifiers",
    "share of exact identifiers (PR, SHA, URL, branch, dir, symbol, error) that left the view and are still visible",
    metrics={
        "identifier_recall": "higher",
        **{f"identifier_recall_{k}": "higher" for k in KINDS},
        "identifiers_left": "info",
        "identifier_exam": "higher",
    },
    catches="summaries that paraphrase away the PR number, the SHA, the URL or the exact error",
)
def identifiers(inp: ProbeInput, max_questions: int = 8) -> list[ProbeValue]:
    """Per event: recall over the identifiers that left the view (none left: no row), overall and
    per kind, and how many left (``identifiers_left``). ``identifier_exam`` is the same over the
    latest ``max_questions`` identifiers the latest user message does not state, with one
    ``identifier_q:<kind>:<hash>`` row per question (the scorecard's paired win/loss/tie); the cap
    keeps the metrics table small on long sessions, as the judge's ``per_kind`` does."""
    gone = left_view(inp)
    if not gone:
        return []
    seen = {i: visible_in_context(inp, i) for i in gone}
    by_kind: dict[str, list[bool]] = {}
    for i in gone:
        by_kind.setdefault(i.kind, []).append(seen[i])
    hits = [h for v in by_kind.values() for h in v]
    out = [ProbeValue("identifier_recall", sum(hits) / len(hits)), ProbeValue("identifiers_left", len(hits))]
    # The generated exam: one question per identifier that left the view, unless the latest user
    # message states it (copying that message would answer it); graded exact, one row each.
    last = last_user_text(inp)
    last_low, exam = last.lower(), []
    for i in reversed(gone):  # the latest first, until max_questions are asked
        if len(exam) >= max_questions:
            break
        if not identifier_visible(i, last, last_low):
            exam.insert(0, (i, seen[i]))
    if exam:
        out.append(ProbeValue("identifier_exam", sum(h for _, h in exam) / len(exam)))
        out += [ProbeValue(f"identifier_q:{question_id(i)}", float(h)) for i, h in exam]
    return out + [ProbeValue(f"identifier_recall_{k}", sum(v) / len(v)) for k, v in sorted(by_kind.items())]
