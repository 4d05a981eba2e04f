"""The offline judge: a labelled stand-in for "ask a model, then grade its answer" (no model).

The *answer* is read from the post-compaction context by the question's own words: the messages
sharing a distinctive word with the question (a word of four or more letters not on a
short common-word list, or one holding a digit, ``/`` or ``_``), plus the message right after each (a call's result follows it),
cut to their last ``max_lines`` lines. The *grade* is 5 × the share of the expected facts the
answer states: text facts by whitespace- and case-folded containment, test counts by "<n> <kind>"
on one line for every non-zero count.

It measures whether the facts are still retrievable by a reader that knows only the question,
not what a model would answer; the probe names its metrics ``judge_offline_*``. It takes only
strings, and shares no code or pattern with the ground truth (:mod:`evalkit.facts`) or the
probes (``tests/test_independence.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

LABEL = "offline judge (retrieval by the question's words: not a model)"
_WORD = re.compile(r"[\w./-]+")
_COMMON = frozenset(
    [
        "about",
        "after",
        "again",
        "answer",
        "before",
        "exact",
        "counts",
        "could",
        "every",
        "given",
        "recent",
        "recently",
        "result",
        "should",
        "their",
        "there",
        "these",
        "those",
        "what",
        "which",
        "while",
        "would",
        "been",
        "done",
        "from",
        "give",
        "have",
        "most",
        "that",
        "them",
        "they",
        "with",
    ]
)
# The prefix each count kind is stated with ("3 failed", "3 failures", "3 failing").
_KIND_PREFIX = {"passed": "pass", "failed": "fail", "errors": "error", "skipped": "skip"}


@lru_cache(maxsize=4096)
def question_words(question: str) -> frozenset[str]:
    """The question's distinctive words, lower-cased."""
    out = set()
    for w in _WORD.findall(question.lower()):
        w = w.strip("./-`?")
        if w not in _COMMON and (len(w) >= 4 or re.search(r"[\d/_]", w)) and sum(c.isalnum() for c in w) >= 3:
            out.add(w)
    return frozenset(out)


def mentions(text: str, words: frozenset[str]) -> bool:
    """Whether ``text`` holds one of ``words`` (case-insensitive substring)."""
    low = text.lower()
    return any(w in low for w in words)


def answer(question: str, messages: Sequence[str], max_lines: int, hits: Sequence[bool] | None = None) -> str:
    """The context's answer to ``question``: relevant messages (and the one after each), last
    ``max_lines`` lines. ``hits`` may give :func:`mentions` per message, precomputed."""
    words = question_words(question)
    if hits is None:
        hits = [mentions(t, words) for t in messages]
    picked = [t for k, t in enumerate(messages) if hits[k] or (k > 0 and hits[k - 1])]
    lines = [ln for t in picked for ln in t.splitlines() if ln.strip()]
    return "\n".join(lines[-max_lines:])


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def counts_stated(counts: dict[str, int], text: str) -> bool:
    """Whether one line of ``text`` states every non-zero count as "<n> <kind...>"."""
    need = [(n, _KIND_PREFIX[k]) for k, n in counts.items() if k in _KIND_PREFIX and n]
    if not need:
        return False
    for line in text.lower().splitlines():
        if all(re.search(rf"(?<![\d.]){n}\s+{p}", line) for n, p in need):
            return True
    return False


def grade(expected: Sequence[str], text: str, counts: dict[str, int] | None = None) -> list[bool]:
    """Which expected facts ``text`` states (one entry when ``counts`` are the fact)."""
    if counts:
        return [counts_stated(counts, text)]
    folded = _fold(text)
    return [_fold(e) in folded for e in expected]
