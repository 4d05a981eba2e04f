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
(``tests/models/test_standin_independence.py``). Every output starts with :data:`LABEL`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.common.templates import REFERENCE_TEMPLATE
from evalkit.contracts.config import ModelConfig
from evalkit.models.backends import BACKENDS, Backend
from evalkit.models.instructions import read_instructions, section_cap
from evalkit.models.request import ChatRequest, ChatResponse
from evalkit.models.transcript import (
    _WORD,
    Item,
    Parsed,
    _command_of,
    _items,
    _latest_per_key,
    _words,
    open_failures,
    parse_transcript,
)

LABEL = "[offline extractive summary: evalkit stand-in, not a model]"
ITEM_CHARS = 300  # the longest item kept when the instructions ask to keep lines as they are
SHORT_CHARS = 160  # otherwise

_HEADING = re.compile(r"^(#{1,3}) (\S.*)$", re.M)


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
        cap = section_cap(h, _parent(headings, i), wants.caps)
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


@BACKENDS.register(
    "extractive", "deterministic offline extractive summarizer (a labelled stand-in)", offline_standin=True
)
def extractive_backend(settings: ModelConfig) -> ExtractiveBackend:
    return ExtractiveBackend()
