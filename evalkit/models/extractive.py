"""The offline deterministic summarizer: extractive summarization into the requested template.

It is a real (if simple) compaction strategy, not a model: it copies lines it can recognise (the
latest test tally, error lines, user constraint lines, failing commands, file paths, the last user
request) into whatever sections the system prompt lists, keeps a ``<previous-summary>`` when the
prompt has one (merging new items in), and honours a length target (``max_tokens`` or an "at most
N tokens/words" instruction). Every output starts with :data:`LABEL`, so no report can mistake it
for a model's summary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from evalkit.models.backends import BACKENDS, Backend
from evalkit.models.request import ChatRequest, ChatResponse
from evalkit.templates import REFERENCE_TEMPLATE

LABEL = "[offline extractive summary: evalkit stand-in, not a model]"
ITEM_CHARS = 300

_HEADING = re.compile(r"^(#{1,3}) (\S.*)$", re.M)
_TAG = r"<{0}>\n?(.*?)\n?</{0}>"
_TALLY = re.compile(
    r"\b\d+ (?:passed|failed|passing|failing|errors?)\b|test result:|Tests:\s|Ran \d+ tests", re.I
)
# No word boundary on the left: "ImportError:" and "panicked" are error lines too.
_ERROR = re.compile(r"(?:error|exception|traceback|fatal|failed|failure|panic)", re.I)
_PATH = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|ts|tsx|js|rs|go|md|toml|json|ya?ml|rb|java|c|h|cfg|ini|txt)\b"
)
_CONSTRAINT = re.compile(
    r"\b(never|don'?t|do not|must|always|only|keep|avoid|without asking|not allowed)\b", re.I
)
_DECISION = re.compile(
    r"\b(decid\w*|chose|instead of|switch(?:ed)? to|going to use|will use|approach)\b", re.I
)
_TARGET = re.compile(
    r"\b(?:at most|under|no more than|within|max(?:imum)?)\s+(\d[\d,]*)\s+(tokens|words)\b", re.I
)


# The same lines recur in every arm's and every round's summarizer input within a session, so
# per-line pattern results are memoized (replay of the default corpus spends most of its time here).
@lru_cache(maxsize=1 << 17)
def _is_tally(text: str) -> bool:
    return _TALLY.search(text) is not None


@lru_cache(maxsize=1 << 17)
def _is_error(text: str) -> bool:
    return _ERROR.search(text) is not None


@lru_cache(maxsize=1 << 17)
def _paths(text: str) -> tuple[str, ...]:
    return tuple(_PATH.findall(text))


_PREFIX = re.compile(r"^(User|Assistant \(thinking\)|Assistant|\[tool result\]|\[tool error\]):?\s?")


class Line(NamedTuple):
    """One line of the re-rendered conversation (a tuple: a head has ~15,000 of them per call)."""

    speaker: str  # user | assistant | thinking | call | result | error
    text: str
    block: int = 0  # which message/tool output the line belongs to


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

    def extract(self, fn: Callable[[Sequence[Line]], list]) -> list:
        """``fn(lines)``, memoized (a copy, so callers may change it)."""
        if fn not in self._found:
            self._found[fn] = fn(self.lines)
        return list(self._found[fn])

    def __add__(self, other: Parsed) -> Parsed:
        return self if not other.lines else Parsed(self.lines + other.lines)


# Most arms hand the summarizer the same conversation with another prompt (state-sections, short)
# or change only what follows the call, and one worker replays every arm of a session in turn:
# the parse and every extractor's pass over it are shared.
@lru_cache(maxsize=12)
def parse_transcript(text: str, first_block: int = 0) -> Parsed:
    """The re-rendered conversation as (speaker, line) pairs; continuation lines keep the speaker.
    Blocks are numbered from ``first_block + 1``, so a second part (the retained tail) can follow
    the first without block numbers colliding."""
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


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for it in items:
        k = it.strip().lower()
        if k and k not in seen:
            seen.add(k)
            out.append(it.strip())
    return out


def _call_command(text: str) -> str:
    name, _, args = text.partition(" ")
    try:
        a = json.loads(args) if args else {}
    except json.JSONDecodeError:
        return text
    if isinstance(a, dict):
        for k in ("command", "file_path", "path", "pattern"):
            if k in a:
                return f"{name} {a[k]}" if name != "Bash" else str(a[k])
    return text


# -- extractors: each reads the parsed lines and returns items, oldest first ---------------------
def _users(lines: Sequence[Line]) -> list[str]:
    return [ln.text for ln in lines if ln.speaker == "user"]


def goal(lines):
    u = _users(lines)
    return u[:1]


def constraints(lines):
    return _dedupe([t for t in _users(lines) if _CONSTRAINT.search(t)])


def _clean(text: str) -> str:
    """A line without the ``=====`` rulers test runners draw around a tally."""
    return text.strip("=-_ ")


def tallies(lines):
    found = [_clean(ln.text) for ln in lines if ln.speaker in ("result", "error") and _is_tally(ln.text)]
    return _dedupe(found)[-3:]


def errors(lines):
    """The error of each failed tool call, latest four: per failed result, its last error-looking
    line (what a reader would quote). One per failure, so a long traceback cannot push the other
    failures out of the section."""
    last: dict[int, str] = {}
    for ln in lines:
        if ln.speaker == "error" and _is_error(ln.text):
            last[ln.block] = _clean(ln.text)
    return _dedupe(list(last.values()))[-4:]


def _runs(lines: Sequence[Line]) -> list[tuple[str, bool, str]]:
    """(command, failed, error line) per tool result, in order, each paired with the oldest call
    still waiting for its result. The error line is the failure's last error-looking line (else
    its last line), the line a reader would quote."""
    out: list[tuple[str, bool, str]] = []
    pending: list[str] = []
    block, cmd, failed, last_err, last = None, None, False, "", ""

    def flush():
        if cmd is not None:
            out.append((cmd, failed, _clean(last_err or last) if failed else ""))

    for ln in lines:
        speaker = ln.speaker
        if speaker == "call":
            pending.append(_call_command(ln.text))
        elif speaker == "result" or speaker == "error":
            if ln.block != block:
                flush()
                block, cmd = ln.block, (pending.pop(0) if pending else None)
                failed, last_err = speaker == "error", ""
            last = ln.text
            if failed and _is_error(last):
                last_err = last
    flush()
    return out


def _item_command(item: str) -> str | None:
    m = re.match(r"`([^`]+)`", item)
    return m.group(1) if m else None


def open_failures(lines):
    """Failures still open at the end: per command, its latest run, when that run failed, as
    "`command`: error line". A command that later succeeded is not blocked any more."""
    latest: dict[str, str | None] = {}
    for cmd, failed, err in _runs(lines):
        latest.pop(cmd, None)  # re-insert: order by latest run
        latest[cmd] = f"`{cmd}`: {err}" if failed else None
    return [it for it in latest.values() if it is not None]


def tests_and_errors(lines):
    """The latest tally and only the errors of its run or later (older ones are stale)."""
    runs = [ln for ln in lines if ln.speaker in ("result", "error") and _is_tally(ln.text)]
    since = runs[-1].block if runs else 0
    return tallies(lines)[-1:] + errors([ln for ln in lines if ln.block >= since])[-3:]


def failed_commands(lines):
    out, last_call = [], None
    for ln in lines:
        if ln.speaker == "call":
            last_call = _call_command(ln.text)
        elif ln.speaker == "error" and last_call:
            out.append(f"`{last_call}` failed: {ln.text}")
            last_call = None
        elif ln.speaker == "result":
            last_call = None
    return _dedupe(out)[-5:]


def progress(lines):
    edits = [
        f"changed {_call_command(ln.text)}"
        for ln in lines
        if ln.speaker == "call" and ln.text.split(" ", 1)[0] in ("Edit", "Write", "MultiEdit")
    ]
    return _dedupe(edits)[-6:] + tallies(lines)[-1:]


def in_progress(lines):
    said = [ln.text for ln in lines if ln.speaker == "assistant"]
    return said[-1:]


def decisions(lines):
    return _dedupe(
        [ln.text for ln in lines if ln.speaker in ("assistant", "user") and _DECISION.search(ln.text)]
    )[-4:]


def next_step(lines):
    return _users(lines)[-1:]


def files(lines):
    seen = _dedupe([m for ln in lines for m in _paths(ln.text)])
    return seen[-15:]


def context(lines):
    cmds = _dedupe(
        [_call_command(ln.text) for ln in lines if ln.speaker == "call" and ln.text.startswith("Bash")]
    )
    return files(lines)[-10:] + cmds[-3:]


def work_state(lines):
    return progress(lines)[-4:] + tests_and_errors(lines) + in_progress(lines)


@dataclass(frozen=True)
class SectionRule:
    """How a template section is filled: which headings it serves (a keyword in the heading), what
    extracts its items, how a previous summary's items combine with new ones (``keep`` the old,
    ``latest`` = new if any, ``merge`` = old + new, ``open`` = old open failures whose command the
    new activity did not run again, then the new ones), and how many items it keeps (newest win)."""

    keywords: tuple[str, ...]
    extract: Callable[[Sequence[Line]], list[str]]
    mode: str
    cap: int = 12


# Order matters: the first rule whose keyword occurs in the heading wins.
RULES: list[SectionRule] = [
    SectionRule(("tests & errors", "test", "error"), tests_and_errors, "latest"),
    SectionRule(("failed", "don't retry", "do not retry"), failed_commands, "merge", 8),
    SectionRule(("goal", "objective", "task"), goal, "keep"),
    SectionRule(("constraint", "preference", "important detail"), constraints, "merge", 20),
    SectionRule(("in progress",), in_progress, "latest"),
    SectionRule(("blocked",), open_failures, "open", 8),
    SectionRule(("work state", "state"), work_state, "latest"),
    SectionRule(("done", "progress"), progress, "merge", 10),
    SectionRule(("decision",), decisions, "merge", 8),
    SectionRule(("next",), next_step, "latest"),
    SectionRule(("file",), files, "merge", 15),
    SectionRule(("context", "detail"), context, "merge", 12),
]


def template_headings(system: str) -> list[str]:
    """The section headings the system prompt asks for, in order (the default six-section
    template when it names none)."""
    seen = _dedupe([f"{m.group(1)} {m.group(2).strip()}" for m in _HEADING.finditer(system)])
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


def length_target(request: ChatRequest) -> int | None:
    """The token budget: ``max_tokens``, tightened by an "at most N tokens/words" instruction.

    Only instructions count: the system prompt and what follows the quoted conversation in the
    user prompt; a user in the transcript asking for "at most 100 words" is not talking to us."""
    texts = []
    for m in request.messages:
        c = str(m.get("content") or "")
        texts.append(c if m.get("role") == "system" else c[c.rfind("</") :] if "</" in c else c)
    budgets = [request.max_tokens] if request.max_tokens else []
    for n, unit in _TARGET.findall(" ".join(texts)):
        v = int(n.replace(",", ""))
        budgets.append(v if unit.lower() == "tokens" else int(v * 4 / 3))
    return min(budgets) if budgets else None


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


def _has_subsections(headings: list[str], i: int) -> bool:
    level = len(headings[i].split(" ", 1)[0])
    return i + 1 < len(headings) and len(headings[i + 1].split(" ", 1)[0]) > level


def _render(headings: list[str], sections: dict[str, list[str]]) -> str:
    out = [LABEL]
    for i, h in enumerate(headings):
        out.append(h)
        items = sections.get(h, [])
        if not items and _has_subsections(headings, i):
            continue  # a parent heading whose subsections carry the content
        numbered = "next" in h.lower()
        out.extend(
            f"{k}. {it[:ITEM_CHARS]}" if numbered else f"- {it[:ITEM_CHARS]}"
            for k, it in enumerate(items or ["(none found)"], 1)
        )
        if not items:
            out[-1] = "- (none found)"
    return "\n".join(out)


def summarize(request: ChatRequest) -> ChatResponse:
    """Fill the template headings found in the system prompt from the conversation text."""
    system = "\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") == "system")
    body = "\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") != "system")
    headings = template_headings(system)
    prev_text = _tag(body, "previous-summary")
    activity = _tag(body, "new-activity") or _tag(body, "conversation")
    if activity is None:
        activity = re.sub(_TAG.format("previous-summary"), "", body, flags=re.S)
    retained = _tag(body, "retained") or ""
    convo = parse_transcript(activity)
    # "State after the tail" sections see the retained tail too.
    latest = convo + parse_transcript(retained, convo.lines[-1].block if convo.lines else 0)
    previous = parse_summary(prev_text) if prev_text else {}

    sections: dict[str, list[str]] = {}
    for i, h in enumerate(headings):
        low = h.lower()
        old = previous.get(low, [])
        rule = next((r for r in RULES if any(k in low for k in r.keywords)), None)
        if rule is None or _has_subsections(headings, i):
            sections[h] = old
            continue
        if rule.mode == "open":
            # Open failures carry over until the new activity runs their command again.
            ran = {cmd for cmd, _, _ in latest.extract(_runs)}
            items = _dedupe([it for it in old if _item_command(it) not in ran] + latest.extract(rule.extract))
            sections[h] = items[-rule.cap :]
            continue
        new = (latest if rule.mode == "latest" else convo).extract(rule.extract)
        if rule.mode == "keep":
            items = old or new
        elif rule.mode == "latest":
            items = new or old
        else:
            items = _dedupe(old + new)
        sections[h] = items[-rule.cap :]

    budget = length_target(request)
    text = _render(headings, sections)
    if budget:
        limit = budget * 4
        # Drop the oldest item of the longest section until the summary fits: recent state wins.
        while len(text) > limit and any(sections.values()):
            h = max(headings, key=lambda k: (len(sections.get(k, [])), -headings.index(k)))
            sections[h] = sections[h][1:]
            text = _render(headings, sections)
        text = text[: max(limit, len(LABEL))]
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
