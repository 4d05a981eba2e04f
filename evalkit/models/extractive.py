"""The offline deterministic summarizer: a general extractive method, not a model.

It scores every line of the rendered head by **salience** (who said it: the user's words weigh
most; how specific it is: rare tokens, identifiers and numbers; where it sits: the closing lines of
a tool output state its outcome) times **recency**, and fills the template sections the system
prompt lists from the lines whose *role* fits the section (the first request for a goal, the
user's other lines for preferences, the outcome of each command, open failures, the assistant's
own statements, paths, the latest request for next steps). Sections it does not recognise are
filled query-style: the outcomes of the latest commands whose text shares a word with the heading.

It follows the generic instructions a real model would: the request's ``max_tokens``, a stated
length target ("about N words", "at most N tokens"), per-section caps ("Key Decisions 5
bullets"), and a request to keep kinds of lines as they are ("keep file paths, commands ...",
"verbatim"); without one, long lines are shortened. It knows no test runner, error format or
constraint wording: it must not share patterns with the ground truth or the probes
(``tests/test_independence.py``). Every output starts with :data:`LABEL`.
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

from evalkit.models.backends import BACKENDS, Backend
from evalkit.models.request import ChatRequest, ChatResponse
from evalkit.templates import REFERENCE_TEMPLATE

LABEL = "[offline extractive summary: evalkit stand-in, not a model]"
ITEM_CHARS = 300  # the longest item kept when the instructions ask to keep lines as they are
SHORT_CHARS = 160  # otherwise
PASTE_LINES = 40  # a user message longer than this is pasted material, not the user's own words

_HEADING = re.compile(r"^(#{1,3}) (\S.*)$", re.M)
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
# every arm of a session in turn: the parse and every extractor's pass over it are shared.
@lru_cache(maxsize=12)
def parse_transcript(text: str, first_block: int = 0) -> Parsed:
    """The re-rendered conversation as (speaker, line, block) tuples; continuation lines keep the
    speaker. Blocks are numbered from ``first_block + 1`` so a second part can follow the first."""
    out: list[Line] = []
    speaker, block = "user", first_block
    for raw in text.splitlines():
        opened, body = _classify(raw)
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


# -- section roles: which items a heading asks for ----------------------------------------------
def _goal(p: Parsed) -> list[Item]:
    return p.extract(_items)["goal"]


def _preferences(p: Parsed) -> list[Item]:
    goal = {it.text for it in _goal(p)}
    return [it for it in p.extract(_items)["user"] if it.text not in goal]


def _done(p: Parsed) -> list[Item]:
    return _latest_per_key(p.extract(_items)["outcome"], _command_of)


def _in_progress(p: Parsed) -> list[Item]:
    return p.extract(_items)["said"][-1:]


def _said(p: Parsed) -> list[Item]:
    return p.extract(_items)["said"]


def _next(p: Parsed) -> list[Item]:
    users = p.extract(_items)["user"]
    return users[-1:]


def _paths(p: Parsed) -> list[Item]:
    return _latest_per_key(p.extract(_items)["path"], lambda it: it.text)


def _context(p: Parsed) -> list[Item]:
    found = p.extract(_items)
    return found["outcome"] + found["failure"] + found["said"] + _paths(p)


def _failures(p: Parsed) -> list[Item]:
    return p.extract(_items)["failure"]


def _state(p: Parsed) -> list[Item]:
    return _done(p)[-4:] + open_failures(p) + _in_progress(p)


@dataclass(frozen=True)
class Role:
    """A kind of section: the heading words that ask for it, its items, how a previous summary's
    items combine with new ones (``keep`` the old, ``latest`` new if any, ``merge`` old + new,
    ``open`` old open failures not run again + new), and its natural size (newest win)."""

    words: tuple[str, ...]
    items: Callable[[Parsed], list[Item]]
    mode: str
    cap: int


# The first role one of whose words occurs in the heading wins.
ROLES: list[Role] = [
    Role(("goal", "objective", "task"), _goal, "keep", 2),
    Role(("constraint", "preference", "requirement", "important detail"), _preferences, "merge", 16),
    Role(("in progress", "current"), _in_progress, "latest", 2),
    Role(("blocked", "open issue"), open_failures, "open", 8),
    Role(("failed", "don't retry", "do not retry", "dead end"), _failures, "merge", 8),
    Role(("work state", "state"), _state, "latest", 8),
    Role(("done", "progress", "completed"), _done, "merge", 10),
    Role(("decision", "rationale"), _said, "merge", 6),
    Role(("next",), _next, "latest", 2),
    Role(("file",), _paths, "merge", 15),
    Role(("context", "detail", "note"), _context, "merge", 10),
]


def _stem(w: str) -> str:
    return w.lower()[:4]


def query_items(p: Parsed, heading: str) -> list[Item]:
    """Items for an unrecognised heading: the latest outcome of each command sharing a word with
    it (a failed output's label is "tool error", so "errors" asks for failures)."""
    words = {_stem(w) for w in _WORD.findall(heading) if len(w) >= 4}
    found = p.extract(_items)
    hits = []
    for it in sorted(found["outcome"] + found["failure"], key=lambda it: it.pos):
        said = _words(_command_of(it)) + (("tool", "error") if it.kind == "failure" else ())
        if words & {_stem(w) for w in said}:
            hits.append(it)
    latest = _latest_per_key(hits, _command_of)
    if "late" in words and latest:  # "latest": the newest run and what failed since
        newest = max(it.pos for it in latest)
        latest = [it for it in latest if it.pos == newest or it.kind == "failure"]
    return latest


# -- instructions -------------------------------------------------------------------------------
_LIMIT = re.compile(
    r"\b(?:at most|under|no more than|within|max(?:imum)?|about|around|roughly|approximately|"
    r"target(?:ing)?(?: about| around)?)\s+~?(\d[\d,]*)\s+(tokens|words)\b",
    re.I,
)
_CAP = re.compile(r"([A-Z][\w &/'-]*?)\s+(\d+)\s+(bullets?|items?|sentences?|lines?|points?)\b")
_KEEP = re.compile(r"\b(?:keep|preserve|quote|retain)\b([^.]*)", re.I)


@dataclass(frozen=True)
class Instructions:
    """What the request asks of the summary beyond its sections."""

    budget_tokens: int | None
    caps: tuple[tuple[str, int], ...]  # (lower-case section name, items)
    keep_whole: frozenset[str]  # item kinds to copy as they are: all, path, command, outcome, failure


def _instruction_text(request: ChatRequest) -> str:
    """The system prompt and what follows the quoted conversation: a user in the transcript asking
    for "at most 100 words" is not talking to the summarizer."""
    texts = []
    for m in request.messages:
        c = str(m.get("content") or "")
        texts.append(c if m.get("role") == "system" else c[c.rfind("</") :] if "</" in c else c)
    return "\n".join(texts)


def read_instructions(request: ChatRequest) -> Instructions:
    """Length target, per-section caps and keep-as-is requests stated in the instructions."""
    text = _instruction_text(request)
    budgets = [request.max_tokens] if request.max_tokens else []
    for n, unit in _LIMIT.findall(text):
        v = int(n.replace(",", ""))
        budgets.append(v if unit.lower() == "tokens" else math.ceil(v * 4 / 3))
    caps = tuple((name.strip().lower().removeprefix("each "), int(k)) for name, k, _ in _CAP.findall(text))
    keep: set[str] = set()
    for m in _KEEP.finditer(text):
        what = m.group(1).lower()
        keep |= {"all"} if "verbatim" in what or "exact" in what else set()
        keep |= {"path"} if "path" in what or "file" in what else set()
        keep |= {"command"} if "command" in what else set()
        keep |= {"outcome"} if "result" in what or "output" in what else set()
        keep |= {"failure"} if "error" in what or "fail" in what else set()
    return Instructions(min(budgets) if budgets else None, caps, frozenset(keep))


def length_target(request: ChatRequest) -> int | None:
    """The token budget: ``max_tokens``, tightened by a stated length target."""
    return read_instructions(request).budget_tokens


def _cap_for(heading: str, parent: str | None, caps: tuple[tuple[str, int], ...]) -> int | None:
    name = heading.split(" ", 1)[1].lower()
    for cap_name, k in caps:
        base = cap_name.removesuffix(" subsection").removesuffix(" subsections")
        if cap_name.endswith(("subsection", "subsections")):
            if parent and base in parent.lower():
                return k
        elif base == name or (len(base) >= 4 and name.startswith(base)):
            return k
    return None


# -- the summary --------------------------------------------------------------------------------
def template_headings(system: str) -> list[str]:
    """The section headings the system prompt asks for, in order (the default template when it
    names none)."""
    seen = list(dict.fromkeys(f"{m.group(1)} {m.group(2).strip()}" for m in _HEADING.finditer(system)))
    return seen or list(REFERENCE_TEMPLATE)


def parse_summary(text: str) -> dict[str, list[str]]:
    """A previous summary's items per heading (list markers stripped, the stand-in label dropped)."""
    out: dict[str, list[str]] = {}
    cur = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line == LABEL:
            continue
        if _HEADING.match(line):
            cur = line.lower()
            out.setdefault(cur, [])
        elif cur is not None:
            item = re.sub(r"^(?:[-*]|\d+\.)\s+", "", line)
            if item != "(none found)":
                out[cur].append(item)
    return out


def _tag(text: str, name: str) -> str | None:
    """The text inside ``<name>…</name>`` (one optional newline trimmed at each end), or None."""
    open_, close = f"<{name}>", f"</{name}>"
    i = text.find(open_)
    if i < 0:
        return None
    j = text.find(close, i + len(open_))
    if j < 0:
        return None
    body = text[i + len(open_) : j]
    body = body[1:] if body.startswith("\n") else body
    return body[:-1] if body.endswith("\n") else body


def _level(h: str) -> int:
    return len(h.split(" ", 1)[0])


def _has_subsections(headings: list[str], i: int) -> bool:
    return i + 1 < len(headings) and _level(headings[i + 1]) > _level(headings[i])


def _parent(headings: list[str], i: int) -> str | None:
    for h in reversed(headings[:i]):
        if _level(h) < _level(headings[i]):
            return h
    return None


def _shorten(item: Item, keep: frozenset[str]) -> str:
    limit = ITEM_CHARS if "all" in keep or item.kind in keep else SHORT_CHARS
    return item.text if len(item.text) <= limit else item.text[: limit - 1] + "…"


def _render(headings: list[str], sections: dict[str, list[Item]], keep: frozenset[str]) -> str:
    out = [LABEL]
    for i, h in enumerate(headings):
        out.append(h)
        items = sections.get(h, [])
        if not items and _has_subsections(headings, i):
            continue  # a parent heading whose subsections carry the content
        if not items:
            out.append("- (none found)")
            continue
        numbered = "next" in h.lower()
        out.extend(
            f"{k}. {_shorten(it, keep)}" if numbered else f"- {_shorten(it, keep)}"
            for k, it in enumerate(items, 1)
        )
    return "\n".join(out)


def _dedupe(items: list[Item]) -> list[Item]:
    seen, out = set(), []
    for it in items:
        k = it.text.strip().lower()
        if k and k not in seen:
            seen.add(k)
            out.append(it)
    return out


def _old(texts: list[str], n: int) -> list[Item]:
    """A previous summary's items: older than anything new, fading in score with age."""
    return [Item(t, 0.5 + 0.5 * k / max(n, 1), -n + k, "old") for k, t in enumerate(texts)]


def _fit(headings: list[str], sections: dict[str, list[Item]], limit: int, keep: frozenset[str]) -> str:
    """Drop the least salient item (never a section's last one first) until the summary fits."""
    text = _render(headings, sections, keep)
    while len(text) > limit:
        pool = [(it.score, h, it) for h, its in sections.items() for it in its if len(its) > 1]
        if not pool:
            pool = [(it.score, h, it) for h, its in sections.items() for it in its]
        if not pool:
            break
        # Drop a batch at a time: a long summary over a small budget would otherwise re-render
        # once per item.
        over = len(text) - limit
        pool.sort(key=lambda x: x[0])
        dropped = 0
        for _, h, it in pool:
            sections[h].remove(it)
            dropped += len(it.text) + 3
            if dropped >= over:
                break
        text = _render(headings, sections, keep)
    return text[: max(limit, len(LABEL))]


def summarize(request: ChatRequest) -> ChatResponse:
    """Fill the template headings found in the system prompt from the conversation text."""
    system = "\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") == "system")
    body = "\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") != "system")
    headings = template_headings(system)
    wants = read_instructions(request)
    prev_text = _tag(body, "previous-summary")
    activity = _tag(body, "new-activity") or _tag(body, "conversation")
    if activity is None:
        activity = re.sub(r"<previous-summary>\n?(.*?)\n?</previous-summary>", "", body, flags=re.S)
    retained = _tag(body, "retained") or ""
    convo = parse_transcript(activity)
    # Sections stating "where things are" read the retained tail too, as its instruction asks.
    latest = convo + parse_transcript(retained, convo.lines[-1].block if convo.lines else 0)
    previous = parse_summary(prev_text) if prev_text else {}

    sections: dict[str, list[Item]] = {}
    for i, h in enumerate(headings):
        low = h.lower()
        old_texts = previous.get(low, [])
        old = _old(old_texts, len(old_texts))
        if _has_subsections(headings, i):
            sections[h] = old
            continue
        role = next((r for r in ROLES if any(w in low for w in r.words)), None)
        cap = _cap_for(h, _parent(headings, i), wants.caps)
        if role is None:
            new = query_items(latest, h)
            items = _dedupe(new or old)
            sections[h] = items[-(cap or 6) :]
            continue
        new = (latest if role.mode in ("latest", "open") else convo).extract(role.items)
        if role.items is _preferences and previous:
            new = convo.extract(_items)["user"]  # new activity opens with no goal: every user line counts
        if role.mode == "open":
            ran = {
                _command_of(it)
                for it in latest.extract(_items)["outcome"] + latest.extract(_items)["failure"]
            }
            items = [it for it in old if _command_of(it) not in ran] + new
        elif role.mode == "keep":
            items = old or new
        elif role.mode == "latest":
            items = new or old
        else:
            items = old + new
        items = _dedupe(items)
        limit = min(role.cap, cap) if cap else role.cap
        if len(items) > limit:
            # The most salient win; the kept ones stay in conversation order.
            best = set(map(id, sorted(items, key=lambda it: -it.score)[:limit]))
            items = [it for it in items if id(it) in best]
        sections[h] = items

    budget = wants.budget_tokens
    text = (
        _fit(headings, sections, budget * 4, wants.keep_whole)
        if budget
        else _render(headings, sections, wants.keep_whole)
    )
    return ChatResponse(text=text, backend="extractive", model=request.model)


class ExtractiveBackend(Backend):
    name = key_backend = "extractive"
    # Cheaper than a cache lookup and deterministic: caching it would only cost disk.
    cacheable = False

    def __call__(self, request: ChatRequest) -> ChatResponse:
        return summarize(request)


BACKENDS.add(
    "extractive",
    lambda settings: ExtractiveBackend(),
    "deterministic offline extractive summarizer (a labelled stand-in)",
    offline_standin=True,
)
