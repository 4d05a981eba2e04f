"""The rendered head as the extractive stand-in reads it: speakers, messages, candidate items.

Lines are parsed once per conversation and every extractor's pass is memoized (:class:`Parsed`).
Candidate items (user lines, assistant statements, commands, each output's closing line, paths)
are scored by **salience** (tokens rare among the candidates, identifiers and numbers, repeated
lines damped) × a speaker weight × **recency**. No test runner, error format or constraint
wording is known here (``tests/models/test_standin_independence.py``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

PASTE_LINES = 40  # a user message longer than this is pasted material, not the user's own words

_WORD = re.compile(r"[A-Za-z_][\w]*|\d[\w.]*")
_SPECIFIC = re.compile(r"[\d/_.:`]")
_PATHLIKE = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.[A-Za-z]{1,5}\b")
_RULER = re.compile(r"^[\W_]*$")


class Line(NamedTuple):
    """One line of the re-rendered conversation (a tuple: a head has ~15,000 of them per call)."""

    speaker: str  # user | assistant | thinking | call | result | error
    text: str
    block: int = 0  # which message/tool output the line belongs to


_PREFIX = re.compile(r"^(User|Assistant \(thinking\)|Assistant|\[tool result\]|\[tool error\]):?\s?")
_SPEAKERS = {
    "User": "user",
    "Assistant": "assistant",
    "Assistant (thinking)": "thinking",
    "[tool result]": "result",
    "[tool error]": "error",
}


_OPENERS = frozenset(k[0] for k in _SPEAKERS)


@lru_cache(maxsize=1 << 18)
def _classify(raw: str) -> tuple[str | None, str]:
    """(speaker if the line opens a new message, else None; the stripped body)."""
    m = _PREFIX.match(raw)
    if not m:
        return None, raw.strip()
    tag, body = m.group(1), raw[m.end() :]
    if tag == "Assistant" and body.startswith("[tool call]"):
        return "call", body[len("[tool call]") :].strip()
    return _SPEAKERS[tag], body.strip()


class Parsed:
    """A parsed conversation and what each extractor found in it, computed once per extractor."""

    __slots__ = ("_found", "lines")

    def __init__(self, lines: tuple[Line, ...]):
        self.lines = lines
        self._found: dict[Callable, list] = {}

    def extract(self, fn: Callable[[Parsed], Any]) -> Any:
        """``fn(self)``, memoized (shared: callers must not change it)."""
        if fn not in self._found:
            self._found[fn] = fn(self)
        return self._found[fn]

    def __add__(self, other: Parsed) -> Parsed:
        return self if not other.lines else Parsed(self.lines + other.lines)


# Most arms hand the summarizer the same conversation with another prompt, and one worker replays
# every arm of a session in turn: the parse and every extractor's pass over it are shared. The
# cache holds a session's distinct transcripts (arms replay one after another, so arm 2's first
# round comes ~20 parses after arm 1's): 12 entries re-parsed 224 of 402 requests on a sample of
# the default corpus, 48 re-parse 144 of which 98 are distinct, at no visible change in RSS.
@lru_cache(maxsize=48)
def parse_transcript(text: str, first_block: int = 0) -> Parsed:
    """The re-rendered conversation as (speaker, line, block) tuples; continuation lines keep the
    speaker. Blocks are numbered from ``first_block + 1`` so a second part can follow the first."""
    out: list[Line] = []
    speaker, block = "user", first_block
    for raw in text.splitlines():
        # Only a line opening with one of the prefixes' first letters can open a message: the
        # rest (most lines of tool output) skip the cached classifier and its hashing of the line.
        if raw[:1] in _OPENERS:
            opened, body = _classify(raw)
        else:
            opened, body = None, raw.strip()
        if opened is not None:
            block += 1
            speaker = opened
        if body:
            out.append(Line(speaker, body, block))
    return Parsed(tuple(out))


# -- salience ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Item:
    """A candidate summary line: its text, score and position (for chronological order)."""

    text: str
    score: float
    pos: int
    kind: str  # user | said | command | outcome | failure | path


@lru_cache(maxsize=1 << 17)
def _words(text: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in _WORD.findall(text))


@lru_cache(maxsize=1 << 17)
def _paths_in(text: str) -> tuple[str, ...]:
    return tuple(_PATHLIKE.findall(text)) if "." in text else ()


def salience(texts: list[str]) -> list[float]:
    """Per candidate line: specificity (tokens rare among the candidates, identifiers, numbers),
    with repeated lines damped."""
    df: Counter = Counter()
    seen = Counter(texts)
    words = [_words(t) for t in texts]
    for ws in words:
        df.update(set(ws))
    n = len(texts)
    norm = math.log(n + 1)
    out = []
    for t, ws in zip(texts, words, strict=True):
        rarity = sum(math.log(n / df[w]) for w in ws) / len(ws) / norm if ws and n > 1 else 0.0
        specific = len(_SPECIFIC.findall(t)) / (len(t) or 1)
        out.append((0.5 + rarity + 4 * specific) / seen[t])
    return out


def _recency(pos: int, n: int) -> float:
    return 0.4 + 0.6 * (pos + 1) / max(n, 1)


@lru_cache(maxsize=1 << 16)
def _call_text(text: str) -> str:
    """A tool call as a reader would name it: the command, or the tool and its target."""
    name, _, args = text.partition(" ")
    try:
        a = json.loads(args) if args else {}
    except json.JSONDecodeError:
        return text
    if isinstance(a, dict):
        for v in a.values():  # the first short string argument names the target
            if isinstance(v, str) and 0 < len(v) <= 200 and "\n" not in v:
                return v if name.lower() in ("bash", "shell", "exec_command") else f"{name} {v}"
    return name


def _outcome_line(body: Sequence[str]) -> str:
    """The line a reader quotes from an output: its last line that is not a ruler."""
    for t in reversed(body):
        if not _RULER.match(t):
            return t.strip("=-_* ")
    return ""


class Block(NamedTuple):
    """One message: who, its lines and their positions, and (for tool output) the call it answers."""

    speaker: str
    lines: tuple[str, ...]
    first: int
    call: str | None


def blocks(p: Parsed) -> list[Block]:
    """The conversation's messages in order, each tool output paired with the oldest pending call."""
    out: list[Block] = []
    pending: list[str] = []
    cur: list[str] = []
    speaker, block, first = None, None, 0
    for i, ln in enumerate(p.lines):
        if ln.block != block:
            if speaker is not None:
                out.append(Block(speaker, tuple(cur), first, None))
            speaker, block, first, cur = ln.speaker, ln.block, i, []
        cur.append(ln.text)
    if speaker is not None:
        out.append(Block(speaker, tuple(cur), first, None))
    paired = []
    for b in out:
        if b.speaker == "call":
            pending.append(_call_text(b.lines[0]))
        elif b.speaker in ("result", "error"):
            b = b._replace(call=pending.pop(0) if pending else None)
        paired.append(b)
    return paired


OUTPUT_PATH_LINES = 5  # paths a reader notes from an output: those in its first lines


def _items(p: Parsed) -> dict[str, list[Item]]:
    """Every candidate item by kind, scored by salience × recency."""
    n = len(p.lines)
    raw: list[tuple[str, str, int, float]] = []  # kind, text, position, weight × recency
    goal: list[Item] = []
    paths: list[Item] = []
    for b in p.extract(blocks):
        rec = _recency(b.first, n)
        if b.speaker == "user":
            own = b.lines if len(b.lines) <= PASTE_LINES else b.lines[:3]  # a paste: its intro only
            if not goal:
                goal = [Item(own[0], 9.0, b.first, "goal")]
            raw.extend(("user", t, b.first + k, 3.0 * rec) for k, t in enumerate(own))
        elif b.speaker == "assistant":
            raw.extend(("said", t, b.first + k, 1.5 * rec) for k, t in enumerate(b.lines))
        elif b.speaker == "call":
            raw.append(("command", _call_text(b.lines[0]), b.first, 1.2 * rec))
        elif b.speaker in ("result", "error"):
            line = _outcome_line(b.lines)
            if line:
                kind = "failure" if b.speaker == "error" else "outcome"
                label = f"`{b.call}`: {line}" if b.call else line
                raw.append(
                    (kind, label, b.first + len(b.lines) - 1, (2.0 if kind == "failure" else 1.0) * rec)
                )
        shown = b.lines[:OUTPUT_PATH_LINES] if b.speaker in ("result", "error") else b.lines
        paths.extend(Item(m, rec, b.first + k, "path") for k, t in enumerate(shown) for m in _paths_in(t))
    out: dict[str, list[Item]] = {k: [] for k in ("user", "said", "command", "outcome", "failure")}
    for (kind, text, pos, w), sal in zip(raw, salience([r[1] for r in raw]), strict=True):
        out[kind].append(Item(text, w * sal, pos, kind))
    out["goal"], out["path"] = goal, paths
    return out


def _latest_per_key(items: list[Item], key: Callable[[Item], str]) -> list[Item]:
    last: dict[str, Item] = {}
    for it in items:
        last.pop(key(it), None)
        last[key(it)] = it
    return list(last.values())


def _command_of(item: Item) -> str:
    m = re.match(r"`([^`]+)`", item.text)
    return m.group(1) if m else item.text


def open_failures(p: Parsed) -> list[Item]:
    """Per command, its latest outcome when that was a failure (a later success closes it)."""
    runs = sorted(p.extract(_items)["failure"] + p.extract(_items)["outcome"], key=lambda it: it.pos)
    return [it for it in _latest_per_key(runs, _command_of) if it.kind == "failure"]


def clear_caches() -> None:
    """Empty the per-line and per-conversation caches.

    Their keys are one session's own lines: they pay within a session (its arms summarize the same
    messages) and not across sessions (40 default sessions replayed in a row: every key missed
    once, none came back in a later session). Replay clears them after each session, so a worker's
    memory stays flat instead of growing ~2.5 MB a session up to the caches' bounds."""
    for fn in (_classify, _words, _paths_in, _call_text, parse_transcript):
        fn.cache_clear()
