"""Derive a session's facts in one pass over its messages."""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from evalkit.contracts.session import Compaction, Session, Text, ToolCall
from evalkit.facts import identifiers
from evalkit.facts.commands import command_of, files_of, normalize_command
from evalkit.facts.constraints import constraint_lines, constraint_sentences
from evalkit.facts.failures import attempt_key, call_failed
from evalkit.facts.tallies import find_tally

__all__ = ["compute_facts", "constraint_lines", "error_line", "is_test_command"]


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
    """A tool call that failed (evalkit.facts.failures.call_failed); ``command`` is the shell
    command, or the tool's name and target for other tools."""

    message_index: int
    call_id: str
    command: str
    normalized: str
    exit_code: int | None
    error_line: str
    fixed_at: int | None  # message index of a later success of the same attempt (failures.attempt_key)
    tool: str = ""  # the tool's name: failures of edits, patches and rejected calls count too


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
    untallied_runs: list[int] = field(default_factory=list)  # test runs whose output has no tally


_ERROR_LINE = re.compile(r"(error|exception|traceback|failed|fatal|not found|denied|FAIL)", re.I)


def error_line(output: str) -> str:
    """The line a reader would quote as 'the error': the last line that looks like one."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _ERROR_LINE.search(ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


# A test run whose output holds no tally leaves the latest result unknown (cut off, crashed,
# another reporter): these are the commands that run tests.
_TEST_COMMAND = re.compile(
    r"\b(?:pytest|py\.test|unittest|nose2|tox|go test|cargo (?:test|nextest)|jest|vitest|mocha|"
    r"node --test|(?:npm|yarn|pnpm|bun) (?:run )?test|deno test|rspec|phpunit|ctest|"
    r"mvn\b[^|;&]*\btest|gradlew? [^|;&]*\btest|make (?:test|check))\b"
)
_OPEN_FILE = re.compile(r"^\(Open file: (.+?)\)\s*$|^\[File: (.+?) \(\d+ lines total\)\]", re.M)
# SWE-agent's prompt trailer names the shell's working directory: a relative path a command
# touches is that folder's file (so "create x.py" and a later edit of "/repo/x.py" are one file).
_CWD = re.compile(r"^\(Current directory: (/[^)]*)\)\s*$", re.M)
# aider's edit blocks in assistant text: the new text sits between "=======" and ">>>>>>> REPLACE".
_AIDER_REPLACE = re.compile(r"^=======[ \t]*\n(.*?)(?:^>>>>>>> REPLACE|^```|\Z)", re.M | re.S)


def is_test_command(cmd: str) -> bool:
    """Does this shell command run a test suite?"""
    return bool(_TEST_COMMAND.search(cmd))


def _strings(value) -> Iterator[str]:
    """Every string inside a call's (nested) arguments."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in ("thought", "description", "todos"):
                yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _call_identifiers(call: ToolCall) -> Iterator[tuple[str, str]]:
    for text in _strings(call.args):
        yield from identifiers.in_text(text)
    cmd = command_of(call)
    if cmd:
        yield from identifiers.in_command(cmd)
        if cmd.lstrip().startswith(("edit ", "insert", "append")):  # SWE-agent: the body is the new text
            yield from (("symbol", n) for n in identifiers.symbols(cmd.split("\n", 1)[-1]))
    for v in _new_texts(call):
        yield from (("symbol", n) for n in identifiers.symbols(v))
    for key in ("input", "patch"):  # apply_patch: the added lines
        v = call.args.get(key)
        if isinstance(v, str) and "*** Begin Patch" in v:
            added = "\n".join(ln[1:] for ln in v.splitlines() if ln.startswith("+"))
            yield from (("symbol", n) for n in identifiers.symbols(added))


def _new_texts(call: ToolCall) -> list[str]:
    """The new text an edit call writes: its own text argument, and each edit of a batch
    (Claude Code's MultiEdit carries ``edits: [{old_string, new_string}, …]``)."""
    parts = [call.args] + [e for e in call.args.get("edits") or [] if isinstance(e, dict)]
    return [v for a in parts for k in identifiers.NEW_TEXT_KEYS if isinstance(v := a.get(k), str)]


def _has_new_text(call: ToolCall) -> bool:
    return any(v.strip() for v in _new_texts(call))


def _in_dir(cwd: str, path: str) -> str:
    """``path`` as seen from the shell folder ``cwd`` (absolute and home paths stay as they are)."""
    return path if path.startswith(("/", "~")) else posixpath.join(cwd, path)


class _Builder:
    """One pass over a session's messages; each tool call is judged when its result arrives."""

    def __init__(self, session: Session):
        self.facts = Facts(session=session.id)
        self.calls: dict[str, tuple[int, ToolCall, list[str]]] = {}  # id -> (index, call, modified)
        self.open_failures: dict[str, list[int]] = {}  # attempt key -> unfixed failure indices
        self.open_file: str | None = None
        self.cwd: str | None = None
        self.seen_ids: set[tuple[str, str]] = set()

    def identifier(self, i: int, kind: str, value: str) -> None:
        if value and (kind, value) not in self.seen_ids:
            self.seen_ids.add((kind, value))
            self.facts.identifiers.append(Identifier(i, kind, value))

    def message(self, i: int, msg) -> None:
        for block in msg.blocks:
            if isinstance(block, Compaction):
                self.facts.compactions.append(
                    CompactionPoint(
                        i, block.tokens_before, block.tokens_after, block.trigger, len(block.summary)
                    )
                )
        own = [b.text for b in msg.blocks if isinstance(b, Text) and not b.synthetic]
        if msg.is_genuine_user():
            for text in own:
                for rule, kw in constraint_sentences(text):
                    self.facts.constraints.append(Constraint(i, rule, kw))
        if msg.role in ("user", "assistant") and not msg.meta.get("synthetic"):
            for text in own:
                for kind, value in identifiers.in_text(text):
                    self.identifier(i, kind, value)
                if msg.role == "assistant":
                    for m in _AIDER_REPLACE.finditer(text):
                        for name in identifiers.symbols(m.group(1)):
                            self.identifier(i, "symbol", name)
        for call in msg.tool_calls():
            read, modified = files_of(call, self.open_file)
            if self.cwd:
                modified = [_in_dir(self.cwd, p) for p in modified]
            self.facts.files_read.extend(FileTouch(i, p, call.name) for p in read)
            self.calls[call.id] = (i, call, modified)
            for kind, value in _call_identifiers(call):
                self.identifier(i, kind, value)
        for res in msg.tool_results():
            self.result(i, res)

    def resolve_earlier(self, cwd: str) -> None:
        """Join the relative paths seen before the harness first printed its working directory
        (SWE-agent's ``create reproduce.py`` comes before any ``(Current directory: …)``), so one
        file is not counted under a relative and an absolute spelling."""
        for touches in (self.facts.files_read, self.facts.files_modified):
            touches[:] = [replace(t, path=_in_dir(cwd, t.path)) for t in touches]
        self.calls = {k: (i, c, [_in_dir(cwd, p) for p in mod]) for k, (i, c, mod) in self.calls.items()}

    def result(self, i: int, res) -> None:
        at, call, modified = self.calls.get(res.call_id, (i, None, []))
        cmd = command_of(call) if call else None
        tally = find_tally(res.output)
        if tally:
            self.facts.tallies.append(
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
        elif cmd and is_test_command(cmd):
            self.facts.untallied_runs.append(i)
        failed = call_failed(call, res, tally)
        if not failed:  # a failed or rejected edit changed nothing
            self.facts.files_modified.extend(FileTouch(at, p, call.name) for p in modified if call)
            if (
                call is not None
                and not _has_new_text(call)
                and modified
                and res.output.lstrip().startswith("--- ")
            ):
                added = "\n".join(ln[1:] for ln in res.output.splitlines() if ln.startswith("+"))
                for name in identifiers.symbols(added):  # OpenHands' editor reports the new text as a diff
                    self.identifier(at, "symbol", name)
        out = res.output
        opened = (
            [g1 or g2 for g1, g2 in _OPEN_FILE.findall(out)]
            if "(Open file:" in out or "[File:" in out
            else []
        )
        if opened and opened[-1] != "n/a":
            self.open_file = opened[-1]
        cwd = _CWD.findall(out) if "(Current directory:" in out else []
        if cwd:
            if self.cwd is None:
                self.resolve_earlier(cwd[0])
            self.cwd = cwd[-1]
        if call is None or not (failed or self.open_failures):
            return
        key = attempt_key(call)
        if failed:
            command = cmd or key
            norm = normalize_command(cmd) if cmd else key
            self.open_failures.setdefault(key, []).append(len(self.facts.failures))
            self.facts.failures.append(
                Failure(i, res.call_id, command, norm, res.exit_code, error_line(res.output), None, call.name)
            )
            self.identifier(
                i, "error", identifiers.error_string(res.output, refused=res.is_error and not cmd)
            )
        else:
            # Every earlier failure of the same attempt is fixed by this success.
            for k in self.open_failures.pop(key, []):
                self.facts.failures[k] = replace(self.facts.failures[k], fixed_at=i)


def compute_facts(session: Session) -> Facts:
    """Facts of one session, in message order."""
    b = _Builder(session)
    for i, msg in enumerate(session.messages):
        b.message(i, msg)
    return b.facts


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
    return Facts(
        session=d["session"],
        untallied_runs=list(d.get("untallied_runs", [])),
        **{k: [cls(**x) for x in d.get(k, [])] for k, cls in _KINDS.items()},
    )


def read_facts(path: str | os.PathLike) -> Iterator[Facts]:
    """Stream facts from ``facts.jsonl`` (or a corpus folder)."""
    p = Path(path)
    if p.is_dir():
        p = p / "facts.jsonl"
    with open(p, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield facts_from_dict(json.loads(line))
