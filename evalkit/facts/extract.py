"""Derive a session's facts in one pass over its messages."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evalkit.facts.commands import command_of, files_of, normalize_command
from evalkit.facts.tallies import find_tally
from evalkit.session import Compaction, Session, Text, ToolCall


@dataclass(frozen=True, slots=True)
class TallyFact:
    """A test tally found in one tool result."""

    message_index: int
    call_id: str
    command: str
    runner: str
    passed: int
    failed: int
    errors: int
    skipped: int
    offset: int
    line: str
    output_chars: int
    unit: str = "tests"


@dataclass(frozen=True, slots=True)
class Constraint:
    """A user line that states a rule or preference."""

    message_index: int
    text: str
    keyword: str


@dataclass(frozen=True, slots=True)
class Failure:
    """A command whose result was an error or a non-zero exit."""

    message_index: int
    call_id: str
    command: str
    normalized: str
    exit_code: int | None
    error_line: str
    fixed_at: int | None  # message index of a later success of the same normalized command


@dataclass(frozen=True, slots=True)
class FileTouch:
    message_index: int
    path: str
    tool: str


@dataclass(frozen=True, slots=True)
class Identifier:
    """A specific the session depends on: a PR or issue number, a commit SHA, a URL, a branch, a
    created directory, a function or class the agent defined or edited, an exact error string."""

    message_index: int
    kind: str  # "pr" | "sha" | "url" | "branch" | "dir" | "symbol" | "error"
    value: str


@dataclass(frozen=True, slots=True)
class CompactionPoint:
    message_index: int
    tokens_before: int | None
    tokens_after: int | None
    trigger: str
    summary_chars: int


@dataclass
class Facts:
    """Everything evalkit knows to be true of one session."""

    session: str
    tallies: list[TallyFact] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    files_read: list[FileTouch] = field(default_factory=list)
    files_modified: list[FileTouch] = field(default_factory=list)
    compactions: list[CompactionPoint] = field(default_factory=list)
    identifiers: list[Identifier] = field(default_factory=list)


# A constraint is a user line with one of these markers. The list follows the wording
# ("never", "don't", "must", "always", "only", "use X not Y", "keep …") plus their common variants.
_CONSTRAINT = re.compile(
    r"\b(never|don'?t|do not|must(?: not)?|always|only|avoid|keep|make sure|no more than|"
    r"use \S+(?: \S+)? (?:not|instead of)|prefer|without|stick to|under no circumstances)\b",
    re.I,
)
_ERROR_LINE = re.compile(r"(error|exception|traceback|failed|fatal|not found|denied|FAIL)", re.I)


def constraint_lines(text: str) -> Iterator[tuple[str, str]]:
    """(line, keyword) for each line of a user message that states a rule or preference."""
    fenced = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            fenced = not fenced  # pasted code and logs are not the user's instructions
            continue
        line = line.lstrip("-*• ").strip()
        if fenced or len(line) < 8 or line.startswith((">", "$ ")):
            continue
        m = _CONSTRAINT.search(line)
        if m:
            yield line, m.group(1).lower()


def error_line(output: str) -> str:
    """The line a reader would quote as 'the error': the last line that looks like one."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _ERROR_LINE.search(ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def compute_facts(session: Session) -> Facts:
    """Facts of one session, in message order."""
    facts = Facts(session=session.id)
    calls: dict[str, ToolCall] = {}
    open_failures: dict[str, int] = {}  # normalized command -> index into facts.failures
    for i, msg in enumerate(session.messages):
        for block in msg.blocks:
            if isinstance(block, Compaction):
                facts.compactions.append(
                    CompactionPoint(
                        i, block.tokens_before, block.tokens_after, block.trigger, len(block.summary)
                    )
                )
        if msg.is_genuine_user():
            for b in msg.blocks:
                if isinstance(b, Text) and not b.synthetic:
                    for line, kw in constraint_lines(b.text):
                        facts.constraints.append(Constraint(i, line, kw))
        for call in msg.tool_calls():
            calls[call.id] = call
            read, modified = files_of(call)
            facts.files_read.extend(FileTouch(i, p, call.name) for p in read)
            facts.files_modified.extend(FileTouch(i, p, call.name) for p in modified)
        for res in msg.tool_results():
            call = calls.get(res.call_id)
            cmd = command_of(call) if call else None
            tally = find_tally(res.output)
            if tally:
                facts.tallies.append(
                    TallyFact(
                        i,
                        res.call_id,
                        cmd or "",
                        tally.runner,
                        tally.passed,
                        tally.failed,
                        tally.errors,
                        tally.skipped,
                        tally.offset,
                        tally.line,
                        len(res.output),
                        tally.unit,
                    )
                )
            if cmd is None:
                continue
            norm = normalize_command(cmd)
            failed = res.is_error or (res.exit_code not in (None, 0))
            if failed:
                open_failures[norm] = len(facts.failures)
                facts.failures.append(
                    Failure(i, res.call_id, cmd, norm, res.exit_code, error_line(res.output), None)
                )
            elif norm in open_failures:
                k = open_failures.pop(norm)
                facts.failures[k] = _fixed(facts.failures[k], i)
                # Earlier failures of the same command were fixed by the same success.
                for j, f in enumerate(facts.failures):
                    if f.normalized == norm and f.fixed_at is None:
                        facts.failures[j] = _fixed(f, i)
    return facts


def _fixed(f: Failure, at: int) -> Failure:
    return Failure(f.message_index, f.call_id, f.command, f.normalized, f.exit_code, f.error_line, at)


# --------------------------------------------------------------------------- storage

_KINDS = {
    "tallies": TallyFact,
    "constraints": Constraint,
    "failures": Failure,
    "files_read": FileTouch,
    "files_modified": FileTouch,
    "compactions": CompactionPoint,
    "identifiers": Identifier,
}


def facts_to_dict(f: Facts) -> dict:
    return asdict(f)


def facts_from_dict(d: dict) -> Facts:
    return Facts(session=d["session"], **{k: [cls(**x) for x in d.get(k, [])] for k, cls in _KINDS.items()})


def read_facts(path: str | os.PathLike) -> Iterator[Facts]:
    """Stream facts from ``facts.jsonl`` (or a corpus folder)."""
    p = Path(path)
    if p.is_dir():
        p = p / "facts.jsonl"
    with open(p, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield facts_from_dict(json.loads(line))
