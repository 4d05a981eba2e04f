"""The offline judge: a labelled stand-in for "ask a model, then grade its answer" (no model).

The *answer* is what a retrieval reader with a fixed reading budget quotes from the
post-compaction context. The context is cut into passages (a few lines of one message); each
passage is scored against the question by BM25 with the context's own statistics, so a word
found in most passages (a summary's headings, "file", "test") weighs little and a rare one (a
path, a command, an identifier) a lot. The best passages, each with the passage after it (a
call's result follows the call), are read until ``max_chars`` are spent, ties going to the later
passage (the newer state), and quoted in context order. The *grade* is 5 × the share of the
expected facts the answer states: text facts by whitespace- and case-folded containment, test
counts by "<n> <kind>" on one line for every non-zero count.

It measures whether the facts are still retrievable by a reader that knows only the question,
not what a model would answer; the probe names its metrics ``judge_offline_*``. It takes only
strings, knows nothing of how the questions are phrased, and shares no code or pattern with the
ground truth (:mod:`evalkit.facts`) or the probes (``tests/models/test_standin_independence.py``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain

LABEL = "offline judge (BM25 retrieval of passages by the question's words: not a model)"
# The reading budget: about 4k tokens (chars/4), the size of the context a compaction keeps on the
# real sessions (experiments/scorecard.toml), so a compacted context is read nearly whole and only a
# longer history is cut, by relevance. Smaller budgets favour summaries over the full history
# (docs/probes.md, "the offline judge's reading budget").
MAX_CHARS = 16000
_PASSAGE_LINES = 8
_PASSAGE_CHARS = 600
_MESSAGES_READ = 64  # the best-ranked messages whose passages compete for the budget
_LINE_CHARS = 240  # longer lines (one-line JSON tool calls) are wrapped at a space
_K1, _B = 1.2, 0.75  # the usual BM25 constants (Robertson & Zaragoza 2009)
_WORD = re.compile(r"\w(?:[\w./-]*\w)?")  # a word, path or dotted name, without edge punctuation
_PART = re.compile(r"[a-z0-9]+")
# English function words and the words any question is phrased with: they carry no topic.
_STOP = frozenset(
    """a about after again all also an and answer any are as at be been before but by can could did do
    does done each every exact for from give given had has have how i if in into is it its just me more
    most my no not of on or our over recent recently should so some such than that the their them then
    there these they this those to too up us was we were what when where which while who why will with
    would yet you your""".split()  # noqa: SIM905 (a word list reads better as prose)
)
# The prefix each count kind is stated with ("3 failed", "3 failures", "3 failing").
_KIND_PREFIX = {"passed": "pass", "failed": "fail", "errors": "error", "skipped": "skip"}


def _stem(w: str) -> str:
    """Harman's S-stemmer (1991): plurals fold onto their singular ("files" -> "file")."""
    if len(w) <= 3 or any(c.isdigit() for c in w):
        return w
    if w.endswith("ies") and not w.endswith(("eies", "aies")):
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith(("us", "ss")):
        return w[:-1]
    return w


@lru_cache(maxsize=65536)
def _word_terms(word: str) -> tuple[str, ...]:
    parts = [_stem(p) for p in _PART.findall(word) if p not in _STOP and (len(p) > 1 or p.isdigit())]
    # a compound (a path, a dotted name, a command flag) also counts whole: its exact match is rarer
    return (word, *parts) if len(_PART.findall(word)) > 1 else tuple(parts)


def terms(text: str) -> list[str]:
    """The index terms of ``text``: lower-cased words and the parts of compound words, minus
    function words, plurals folded."""
    return [t for w in _WORD.findall(text.lower()) for t in _word_terms(w)]


@dataclass(frozen=True)
class Passage:
    """A few consecutive lines of one message."""

    text: str
    low: str  # lower-cased, for matching
    length: int  # characters


def _lines(text: str):
    for line in text.splitlines():
        line = line.strip()
        while len(line) > _LINE_CHARS:
            cut = line.rfind(" ", 0, _LINE_CHARS)
            cut = cut if cut > 0 else _LINE_CHARS
            yield line[:cut]
            line = line[cut:].lstrip()
        if line:
            yield line


def passages(text: str) -> list[Passage]:
    """One message cut into passages of at most ``_PASSAGE_LINES`` lines and about
    ``_PASSAGE_CHARS`` characters (blank lines dropped, long lines wrapped at a space)."""
    out: list[Passage] = []
    cur: list[str] = []
    size = 0
    for line in _lines(text):
        if cur and (len(cur) >= _PASSAGE_LINES or size + len(line) > _PASSAGE_CHARS):
            body = "\n".join(cur)
            out.append(Passage(body, body.lower(), size))
            cur, size = [], 0
        cur.append(line)
        size += len(line) + 1
    if cur:
        body = "\n".join(cur)
        out.append(Passage(body, body.lower(), size))
    return out


@dataclass(frozen=True)
class Matcher:
    """How one question's terms are found in a text."""

    long: tuple[str, ...]  # counted wherever they occur
    ies: tuple[tuple[str, str], ...]  # (a -y term, its -ies plural)
    short: dict[str, str]  # whole-word forms of the short terms -> term
    pattern: re.Pattern | None  # the short forms as whole words


@lru_cache(maxsize=4096)
def matcher(question: str) -> Matcher:
    """How the question's terms are found. A term of four or more characters is counted wherever
    it occurs, inside longer words too ("file" in "files", "file_path"; a -y term also as -ies);
    a shorter one ("ls", "py", "42") only as a whole word, by one pattern, with its plural."""
    qs = sorted(set(terms(question)))
    long = tuple(t for t in qs if len(t) >= 4)
    short = {f: t for t in qs if len(t) < 4 for f in (t, t + "s")}
    # Each form is checked for a letter or digit before it after it matched, not at every position
    # first: the same matches as (?<![a-z0-9])(?:forms)(?![a-z0-9]), found a third faster, since
    # the pattern now starts with the forms' first characters.
    alts = "|".join(rf"{f}(?<![a-z0-9]{f})" for f in map(re.escape, sorted(short, key=len, reverse=True)))
    pattern = re.compile(rf"(?:{alts})(?![a-z0-9])") if short else None
    return Matcher(long, tuple((t, t[:-1] + "ies") for t in long if t.endswith("y")), short, pattern)


def counts(question: str, low: str) -> dict[str, int]:
    """How often each of the question's terms occurs in the lower-cased ``low`` (absent ones left out)."""
    m = matcher(question)
    tf = {t: c for t, c in zip(m.long, map(low.count, m.long), strict=True) if c}
    for t, f in m.ies:
        if c := low.count(f):
            tf[t] = tf.get(t, 0) + c
    if m.pattern is not None and any(f in low for f in m.short):
        for w, c in Counter(m.pattern.findall(low)).items():
            tf[m.short[w]] = tf.get(m.short[w], 0) + c
    return tf


def _weights(tfs: Iterable[dict[str, int]], n: int) -> dict[str, float]:
    """BM25's inverse document frequency of each term, over ``n`` documents."""
    df = Counter(chain.from_iterable(tfs))  # each document's terms once: iterated in C
    return {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}


def bm25(
    tfs: Sequence[dict[str, int]],
    lengths: Sequence[int],
    idf: dict[str, float] | None = None,
    avg: float | None = None,
) -> list[float]:
    """Each document's BM25 score from its term counts and length (characters); the inverse
    document frequencies and the mean length are these documents' own unless given."""
    if not tfs:
        return []
    idf = _weights(tfs, len(tfs)) if idf is None else idf
    avg = (sum(lengths) / len(lengths) or 1.0) if avg is None else avg
    out = []
    # a plain loop, not sum() over a generator: this runs for ~600 passages per question
    k1p, get = _K1 + 1, idf.get
    for tf, n in zip(tfs, lengths, strict=True):
        score = 0
        if tf:
            norm = _K1 * (1 - _B + _B * n / avg)
            for t, f in tf.items():
                w = get(t)
                if w is not None:
                    score += w * f * k1p / (f + norm)
        out.append(float(score))
    return out


class Context:
    """The messages a reader searches, indexed per message. A caller that meets the same message
    in many contexts (kept messages recur across events and arms) caches :meth:`counts`,
    :meth:`passages` and :meth:`passage_counts` per message."""

    def __init__(self, messages: Sequence[str]):
        self.messages = messages
        self.sizes = [len(t) for t in messages]

    def __len__(self) -> int:
        return len(self.sizes)

    def text(self, i: int) -> str:
        return self.messages[i]

    def counts(self, question: str) -> list[dict[str, int]]:
        """Per message, the question's term counts."""
        return [counts(question, self.text(i).lower()) for i in range(len(self))]

    def passages(self, i: int) -> list[Passage]:
        return passages(self.text(i))

    def passage_counts(self, question: str, i: int) -> list[dict[str, int]]:
        return [counts(question, p.low) for p in self.passages(i)]


def answer(question: str, messages: Sequence[str] | Context, max_chars: int = MAX_CHARS) -> str:
    """The context's answer to ``question``, in context order: the messages ranked by BM25 (the
    context's own term statistics), then the best passages of the first ``_MESSAGES_READ`` of
    them, each with the passage after it, until ``max_chars`` are read."""
    ctx = messages if isinstance(messages, Context) else Context(messages)
    tfs = ctx.counts(question)
    idf = _weights(tfs, len(tfs))
    hit = [i for i, tf in enumerate(tfs) if tf]
    avg = sum(ctx.sizes) / len(ctx.sizes) if ctx.sizes else 1.0
    scores = bm25([tfs[i] for i in hit], [ctx.sizes[i] for i in hit], idf, avg or 1.0)
    ranked = [i for _, i in sorted(zip(scores, hit, strict=True), reverse=True)]
    # the passages of the best-ranked messages that hold a term of the question, scored by BM25
    # among themselves (passage lengths; the context's term weights): a long message's weaker
    # passages do not crowd out another message's best one
    read = {i: ctx.passages(i) for i in ranked[:_MESSAGES_READ]}
    msg, idx, tfs_in, lengths = [], [], [], []
    for i, ps in read.items():
        for k, tf in enumerate(ctx.passage_counts(question, i)):
            if tf:
                msg.append(i)
                idx.append(k)
                tfs_in.append(tf)
                lengths.append(ps[k].length)
    within = bm25(tfs_in, lengths, idf)
    chosen: dict[tuple[int, int], str] = {}
    used = 0
    # best first; on equal scores the later passage (the newer state)
    for _, i, k in sorted(zip(within, msg, idx, strict=True), reverse=True):
        ps = read[i]
        for j, p in ((i, k), ps[k]), _after(ctx, i, k, ps):
            if p is not None and j not in chosen and used + p.length <= max_chars:
                chosen[j] = p.text
                used += p.length
        if used >= max_chars - 40:
            break
    return "\n".join(chosen[j] for j in sorted(chosen))


def _after(ctx: Context, i: int, k: int, ps: list[Passage]) -> tuple[tuple[int, int], Passage | None]:
    """The passage after passage ``k`` of message ``i`` (a call's result follows the call)."""
    if k + 1 < len(ps):
        return (i, k + 1), ps[k + 1]
    for j in range(i + 1, len(ctx)):
        nxt = ctx.passages(j)
        if nxt:
            return (j, 0), nxt[0]
    return (i, k + 1), None


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
