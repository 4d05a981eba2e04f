"""Finding a known test tally in free text, count-exact and independent of the runner's layout.

A summary rarely copies a runner's line verbatim: it writes "pytest: 12 passed, 3 failed", or
splits the counts over two lines, or quotes an older run. So instead of searching for the
original line, the text is read as *count mentions*: runs of "<n> <kind>" tokens (``12 passed``,
``failures=3``, ``Ran 15 tests``, ``Tests run: 5``) that sit close together. A mention satisfies
a tally when every count agrees (a missing count reads as 0, so "12 passed" does not satisfy
"12 passed, 3 failed"; a stated skip count must agree, an omitted one is not held against it).
Runs are cut where a kind repeats ("10 passed … 12 passed, 3 failed" is two mentions), and only
maximal runs count, so "12 passed, 3 failed" never passes for "12 passed, 0 failed".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from evalkit.common.textscan import lines_with
from evalkit.facts import TallyFact

_KINDS = {
    "passed": "passed",
    "passing": "passed",
    "passes": "passed",
    "pass": "passed",
    "failed": "failed",
    "failing": "failed",
    "failures": "failed",
    "failure": "failed",
    "fails": "failed",
    "fail": "failed",
    "errors": "errors",
    "error": "errors",
    "errored": "errors",
    "skipped": "skipped",
    "skips": "skipped",
    "skip": "skipped",
    "pending": "skipped",
    "ignored": "skipped",
    "disabled": "skipped",
    "total": "total",
    "tests": "total",
    "test": "total",
    "tests run": "total",
    "ran": "total",
}
# Kinds that belong to a tally line but carry no pass/fail count; they keep a run together.
_OTHER = ("warnings", "warning", "deselected", "xfailed", "xpassed", "measured", "filtered out", "assertions")
_WORDS = "|".join(sorted((*_KINDS, *_OTHER), key=len, reverse=True))
_COUNT_WORDS = "passed|passing|failed|failing|errors?|skipped|pending"
_TOKEN = re.compile(
    rf"(?P<ran>\bran\s+(?P<ran_n>\d+)\s+tests?\b)"
    rf"|(?P<key>\b(?P<key_k>tests run|tests|failures|failed|errors|error|skipped|passed|pending|assertions)"
    rf"\s*[:=]\s*(?P<key_n>\d+)(?!\d)(?!\s+(?:tests?\s+)?(?:{_COUNT_WORDS})\b))"
    rf"|(?P<outof>\bout of\s+(?P<outof_n>\d+)\b)"
    rf"|(?P<num>(?<![\w.%])(?P<num_n>\d+)(?![\d%])[ \t]*(?:tests?[ \t]+)?(?P<num_k>{_WORDS})\b)",
    re.I,
)
MAX_GAP = 40  # characters between two tokens of one mention (", ", "; ", " | ", a line break)

Counts = tuple[tuple[str, int], ...]


# Every token holds one of these words; finding them with str.find on the lowered text and
# running the token pattern only on those lines is ~10x faster than scanning long tool outputs.
_KEYWORDS = (
    "pass",
    "fail",
    "error",
    "skip",
    "pending",
    "ignored",
    "disabled",
    "total",
    "tests",
    "ran ",
    "out of",
)


def _tokens(text: str) -> Iterable[tuple[int, int, str, int]]:
    for a, b in lines_with(text, _KEYWORDS):
        yield from _line_tokens(text, a, b)


def _line_tokens(text: str, a: int, b: int) -> Iterable[tuple[int, int, str, int]]:
    for m in _TOKEN.finditer(text, a, b):
        if m.group("ran"):
            yield m.start(), m.end(), "total", int(m.group("ran_n"))
        elif m.group("key"):
            k = m.group("key_k").lower()
            yield m.start(), m.end(), _KINDS.get(k, k), int(m.group("key_n"))
        elif m.group("outof"):
            yield m.start(), m.end(), "total", int(m.group("outof_n"))
        else:
            k = m.group("num_k").lower()
            yield m.start(), m.end(), _KINDS.get(k, k), int(m.group("num_n"))


def _runs(cluster: list[tuple[str, int]]) -> Iterable[dict[str, int]]:
    """Maximal contiguous runs of a cluster in which no kind repeats."""
    n = len(cluster)
    for i in range(n):
        seen: set[str] = set()
        j = i
        while j < n and cluster[j][0] not in seen:
            seen.add(cluster[j][0])
            j += 1
        # Maximal on the left too: the run cannot be extended by cluster[i-1].
        if i > 0 and cluster[i - 1][0] not in seen:
            continue
        yield dict(cluster[i:j])


def mentions(text: str) -> list[Counts]:
    """Every count mention in ``text`` (deduplicated), each as sorted (kind, n) pairs."""
    clusters: list[list[tuple[str, int]]] = []
    last_end = -(10**9)
    for start, end, kind, n in _tokens(text):
        if start - last_end > MAX_GAP:
            clusters.append([])
        clusters[-1].append((kind, n))
        last_end = end
    out: dict[Counts, None] = {}
    for c in clusters:
        for run in _runs(c):
            out[tuple(sorted(run.items()))] = None
    return list(out)


def tally_counts(t: TallyFact) -> dict[str, int]:
    return {"passed": t.passed, "failed": t.failed, "errors": t.errors, "skipped": t.skipped}


def satisfies(mention: Counts, t: TallyFact) -> bool:
    """Does one mention state exactly this tally's counts?"""
    m = dict(mention)
    if not any(k in m for k in ("passed", "failed", "errors", "skipped", "total")):
        return False
    want = tally_counts(t)
    if "passed" not in m and "total" in m:
        m["passed"] = m["total"] - m.get("failed", 0) - m.get("errors", 0) - m.get("skipped", 0)
    if "total" in m and m["total"] != sum(want.values()) and "passed" in dict(mention):
        return False  # "12 passed, 15 total" with no skip/fail stated is another run
    for k in ("passed", "failed", "errors"):
        if m.get(k, 0) != want[k]:
            return False
    return "skipped" not in m or m["skipped"] == want["skipped"]


def has_counts(t: TallyFact) -> bool:
    return any(tally_counts(t).values())


def found_in(all_mentions: Iterable[Counts], t: TallyFact) -> bool:
    """Is tally ``t`` stated by any of the mentions?"""
    return has_counts(t) and any(satisfies(m, t) for m in all_mentions)


def describe(t: TallyFact) -> str:
    """The tally as a reader would state it: "pytest: 12 passed, 3 failed"."""
    parts = [f"{n} {k}" for k, n in tally_counts(t).items() if n or k == "passed"]
    return f"{t.runner}: " + ", ".join(parts)
