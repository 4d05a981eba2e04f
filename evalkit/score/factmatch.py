"""The lexical check of an exam's expected facts: what the offline bank grade matches, and how.

A bank question's ``expected_facts`` are required facts; a fact may be a list of alternatives
(``["11", "eleven"]`` or ``{"any_of": [...]}``), stated when any one of them is. An alternative
is matched as a phrase on word and number boundaries, case- and whitespace-folded:

- a word is never found inside a longer word ("no" is not in "not", "test" not in "tests");
- a number is compared as a number: "11" is not in "4283", "3" not in "4283 chars" nor "3.5",
  and "4283" is found as "4,283";
- text the harness itself put in the context never counts: the splice banner, the bridge
  sentence, the offline stand-in's label, masking placeholders, prior-summary markers, carry tags
  (:func:`strip_harness`).

A fact longer than :data:`MAX_WORDS` words is a sentence a lexical check cannot read (it would
need the same wording), and a one-word verdict ("correct", "no") is in any context that uses the
word; a question holding either is *not gradable* by the lexical check and is counted apart, never
scored 0. With a model judge the same question is judged by the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

LABEL = "lexical check (facts matched on word and number boundaries: not a model)"
MAX_WORDS = 6
# A verdict given as one word ("correct", "no") is in any context that uses the word (a PR title, a
# banner): only a reader of the answer can grade it, so the lexical check does not.
_VERDICTS = "yes no true false correct incorrect right wrong ok okay approved rejected done pass fail passed failed none"
VERDICT_WORDS = frozenset(_VERDICTS.split())

# A number as written in prose or output: "4283", "4,283", "3.5" (bounded, so "4283" is one number).
_NUMBER = re.compile(
    r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w]|[.,]\d)|(?<![\w.,])\d+(?:\.\d+)?(?![\w]|[.,]\d)"
)


@dataclass(frozen=True)
class Fact:
    """One required fact: stated when any of its alternatives is."""

    alternatives: tuple[str, ...]

    def label(self) -> str:
        return self.alternatives[0] if len(self.alternatives) == 1 else " | ".join(self.alternatives)

    def gradable(self) -> bool:
        """Readable by a lexical check: every alternative at most :data:`MAX_WORDS` words, and not
        a one-word verdict (:data:`VERDICT_WORDS`)."""
        return all(
            len(a.split()) <= MAX_WORDS and a.strip().lower() not in VERDICT_WORDS for a in self.alternatives
        )


def parse_fact(raw: Any, where: str) -> Fact:
    """A fact from a bank: a string, a list of alternative strings, or ``{"any_of": [...]}``.
    ValueError names ``where`` when it is none of these."""
    alts = raw.get("any_of") if isinstance(raw, dict) else raw
    if isinstance(alts, str):
        alts = [alts]
    if not isinstance(alts, list) or not alts or not all(isinstance(a, str) and a.strip() for a in alts):
        raise ValueError(f'{where}: expected a non-empty string, a list of them or {{"any_of": [...]}}')
    return Fact(tuple(a.strip() for a in alts))


def fact_to_json(f: Fact) -> str | dict[str, list[str]]:
    """A fact as a bank writes it: the string, or ``{"any_of": [...]}``."""
    return f.alternatives[0] if len(f.alternatives) == 1 else {"any_of": list(f.alternatives)}


def _number(s: str) -> float:
    return float(s.replace(",", ""))


@lru_cache(maxsize=8192)
def _pattern(alt: str) -> re.Pattern[str] | float:
    """A number alternative as its value; any other as a bounded, whitespace-folded regex."""
    s = alt.strip()
    if _NUMBER.fullmatch(s):
        return _number(s)
    body = r"\s+".join(re.escape(w) for w in s.split())
    head = r"(?<!\w)" if re.match(r"\w", s) else ""
    if s[0].isdigit():
        head += r"(?<!\d[.,])"
    tail = r"(?!\w)" if re.search(r"\w$", s) else ""
    if s[-1].isdigit():
        tail += r"(?![.,]\d)"
    return re.compile(head + body + tail, re.I)


def numbers_in(text: str) -> frozenset[float]:
    """Every number ``text`` states, as a value."""
    return frozenset(_number(m.group(0)) for m in _NUMBER.finditer(text))


def alternative_stated(alt: str, text: str, numbers: frozenset[float] | None = None) -> bool:
    """Whether ``text`` states ``alt`` on word and number boundaries."""
    pat = _pattern(alt)
    if isinstance(pat, float):
        return pat in (numbers_in(text) if numbers is None else numbers)
    return pat.search(text) is not None


def stated(facts: Sequence[Fact], text: str) -> list[bool]:
    """Per fact, whether ``text`` (harness text already stripped) states one of its alternatives."""
    nums = numbers_in(text)
    return [any(alternative_stated(a, text, nums) for a in f.alternatives) for f in facts]


@lru_cache(maxsize=1)
def _harness_patterns() -> tuple[re.Pattern[str], ...]:
    """What the harness writes into a context, from the modules that write it (one source)."""
    from evalkit.contracts.event import MASKED_OUTPUT
    from evalkit.models.extractive import LABEL as EXTRACTIVE
    from evalkit.replay.candidates import BRIDGE
    from evalkit.replay.splice import SPLICE_PREFIX

    def template(t: str) -> str:
        return re.escape(t).replace(re.escape("{n}"), r"\d+")

    return (
        re.compile(template(SPLICE_PREFIX.strip()).replace(r"\n\n", r"\s+")),
        re.compile(re.escape(BRIDGE)),
        re.compile(re.escape(EXTRACTIVE)),
        re.compile(template(MASKED_OUTPUT)),
        re.compile(r"\[prior summary, \d+ tokens\]"),
        re.compile(r"\[… \d+ chars cut by the digest cap …\]"),
        re.compile(r"\[offline [^\]\n]*stand-in[^\]\n]*\]", re.I),
        re.compile(r"</?(?:user-requests|read-files|modified-files|recovered)>"),
    )


def strip_harness(text: str) -> str:
    """``text`` without what the harness injected (banners, markers, bridge lines, carry tags)."""
    for p in _harness_patterns():
        text = p.sub(" ", text)
    return text
