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
from evalkit.facts.commands import _path_arg, command_of, files_of, normalize_command
from evalkit.facts.constraints import (
    agent_tools,
    constraint_lines,
    constraint_sentences,
    is_template,
    rejection_reason,
)
from evalkit.facts.failures import (
    Polls,
    attempt_key,
    edit_lint_error,
    failure_source,
    lint_report_error,
    lint_report_paths,
    never_returned,
    own_output,
    result_body,
    running_session,
)
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
    source: str = "user turn"  # SOURCES["constraints"]: user turn | rejection reason | task template


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
    source: str = ""  # SOURCES["failures"]: how the result says it failed (failures.failure_source)


@dataclass(frozen=True, slots=True)
class FileTouch:
    message_index: int
    path: str
    tool: str


# Where each kind of fact comes from, so a probe can weight or exclude a class and
# ``evalkit facts --check`` can score each class apart.
SOURCES = {
    "constraints": ("user turn", "rejection reason", "task template"),
    "failures": (
        "exit code",
        "error flag",
        "refusal",
        "rejection",
        "lint",
        "test tally",
        "crash",
        "timeout",
        "interrupted",
    ),
    "identifiers": ("message", "call arguments", "edit text", "tool error", "harness commit"),
}


@dataclass(frozen=True, slots=True)
class Identifier:
    """A specific the session depends on: a PR or issue number, a commit SHA, a URL, a branch, a
    created directory, a function or class the agent defined or edited, an exact error string."""

    message_index: int
    kind: str  # "pr" | "sha" | "url" | "branch" | "dir" | "symbol" | "error"
    value: str
    source: str = (
        ""  # SOURCES["identifiers"]: message | call arguments | edit text | tool error | harness commit
    )


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
# aider's "whole" edit format: a line naming the file, then a fenced listing of its full new text
# (a listing the user interrupted has no closing fence: it runs to the end of the message). A
# fence that opens a SEARCH/REPLACE block is the diff format (only its REPLACE half is new text).
_AIDER_WHOLE = re.compile(
    r"^[\w./\\-]*[\w-]\.\w+[ \t]*\n```[\w+#-]*[ \t]*\n(?!<{7} SEARCH)(.*?)(?:^```|\Z)", re.M | re.S
)


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


# Arguments of a call that writes a file which hold the file's content (not anchors for URLs).
_CONTENT_KEYS = {*identifiers.NEW_TEXT_KEYS, "old_string", "old_str", "edits", "diff", "search"}


def _call_identifiers(call: ToolCall) -> Iterator[tuple[str, str, str]]:
    """(kind, value, source) of the identifiers in a call's arguments."""
    writes_file = _path_arg(call.args) is not None
    for key, value in call.args.items():
        if key in ("thought", "description", "todos"):
            continue
        content = writes_file and key in _CONTENT_KEYS
        for text in _strings(value):
            patch = "*** Begin Patch" in text
            for kind, v in identifiers.in_text(text, urls=not (content or patch)):
                yield kind, v, "edit text" if content or patch else "call arguments"
    cmd = command_of(call)
    if cmd:
        yield from ((k, v, "call arguments") for k, v in identifiers.in_command(cmd))
        if cmd.lstrip().startswith(("edit ", "insert", "append")):  # SWE-agent: the body is the new text
            yield from (("symbol", n, "edit text") for n in identifiers.symbols(cmd.split("\n", 1)[-1]))
    for v in _new_texts(call):
        yield from (("symbol", n, "edit text") for n in identifiers.symbols(v))
    for text in _strings({k: call.args.get(k) for k in ("input", "patch", "command", "cmd")}):
        if "*** Begin Patch" in text:  # apply_patch (also inside a shell heredoc): the added lines
            added = "\n".join(ln[1:] for ln in text.splitlines() if ln.startswith("+"))
            yield from (("symbol", n, "edit text") for n in identifiers.symbols(added))


_REPLACE_HALF = re.compile(r"^={7}\s*\n(.*?)^>{7} REPLACE", re.M | re.S)


def _new_texts(call: ToolCall) -> list[str]:
    """The new text an edit call writes: its own text argument, each edit of a batch (Claude
    Code's MultiEdit carries ``edits: [{old_string, new_string}, …]``), and the REPLACE half of
    each block of a SEARCH/REPLACE ``diff`` (Cline's replace_in_file)."""
    parts = [call.args] + [e for e in call.args.get("edits") or [] if isinstance(e, dict)]
    texts = [v for a in parts for k in identifiers.NEW_TEXT_KEYS if isinstance(v := a.get(k), str)]
    diff = call.args.get("diff")
    if isinstance(diff, str) and ">>>>>>> REPLACE" in diff:
        texts += _REPLACE_HALF.findall(diff)
    return texts


def _has_new_text(call: ToolCall) -> bool:
    return any(v.strip() for v in _new_texts(call))


def _in_dir(cwd: str, path: str) -> str:
    """``path`` as seen from the shell folder ``cwd`` (absolute and home paths stay as they are)."""
    return path if path.startswith(("/", "~")) else posixpath.join(cwd, path)


class _Builder:
    """One pass over a session's messages; each tool call is judged when its result arrives."""

    def __init__(self, session: Session):
        self.facts = Facts(session=session.id)
        # Only aider writes whole-file listings as edits; elsewhere a fenced file is prose.
        self.aider = session.source.format == "aider"
        self.calls: dict[str, tuple[int, ToolCall, list[str]]] = {}  # id -> (index, call, modified)
        self.open_failures: dict[str, list[int]] = {}  # attempt key -> unfixed failure indices
        self.open_file: str | None = None
        self.cwd: str | None = None
        self.seen_ids: set[tuple[str, str]] = set()
        # `dir` identifiers of calls whose result has not come yet: a declined `mkdir` made nothing.
        self.pending_dirs: dict[str, list[tuple[int, str, str]]] = {}
        # The edits applied since aider's last lint report (aider lints every file it just wrote).
        self.unlinted: list[tuple[int, ToolCall, object]] = []
        self.fixed_by: dict[int, list[tuple[str, int]]] = {}  # message -> (attempt, failure) it fixed
        self.polls = Polls()
        # The agent's own tools by name, which a user's "use <tool> to …" names (not the code's).
        self.tools = agent_tools(b for m in session.messages for b in m.blocks if isinstance(b, ToolCall))

    def identifier(self, i: int, kind: str, value: str, source: str = "message") -> None:
        if value and (kind, value) not in self.seen_ids:
            self.seen_ids.add((kind, value))
            self.facts.identifiers.append(Identifier(i, kind, value, source))

    def constraints(self, i: int, text: str, source: str) -> None:
        for rule, kw in constraint_sentences(text, reason=source == "rejection reason", tools=self.tools):
            self.facts.constraints.append(Constraint(i, rule, kw, source))

    def fail(self, i: int, call: ToolCall, res, source: str, error: str) -> None:
        """Record a failing call; later successes of the same attempt mark it fixed."""
        cmd = command_of(call)
        key = attempt_key(call)
        self.open_failures.setdefault(key, []).append(len(self.facts.failures))
        self.facts.failures.append(
            Failure(
                i,
                res.call_id,
                cmd or key,
                normalize_command(cmd) if cmd else key,
                res.exit_code,
                # The tool's own words: not a harness's header, trailer or prompt ("bash-$").
                error_line(own_output(result_body(res.output))) or error_line(res.output),
                None,
                call.name,
                source,
            )
        )
        self.identifier(i, "error", error, "tool error")

    def message(self, i: int, msg) -> None:
        for block in msg.blocks:
            if isinstance(block, Compaction):
                self.facts.compactions.append(
                    CompactionPoint(
                        i, block.tokens_before, block.tokens_after, block.trigger, len(block.summary)
                    )
                )
        own = [b.text for b in msg.blocks if isinstance(b, Text) and not b.synthetic]
        if msg.role == "user" and msg.meta.get("harness") != "aider lint":
            self.unlinted.clear()  # aider lints right after it applies edits, before the next turn
        if msg.is_genuine_user():
            for text in own:
                source = (
                    "rejection reason"
                    if msg.meta.get("rejection")
                    else "task template"
                    if is_template(text)
                    else "user turn"
                )
                self.constraints(i, text, source)
        if msg.meta.get("harness") == "aider lint" and self.unlinted:
            self.lint_report(msg.text)
        if msg.role in ("user", "assistant") and not msg.meta.get("synthetic"):
            for text in own:
                # A whole-file listing is the file's content: its URLs and numbers are no anchors.
                said = _AIDER_WHOLE.sub("", text) if self.aider and msg.role == "assistant" else text
                for kind, value in identifiers.in_text(said):
                    self.identifier(i, kind, value)
                if msg.role == "assistant":
                    blocks = [m.group(1) for m in _AIDER_REPLACE.finditer(text)]
                    if self.aider and "```" in text:
                        blocks += [m.group(1) for m in _AIDER_WHOLE.finditer(text)]
                    for block in blocks:
                        for name in identifiers.symbols(block):
                            self.identifier(i, "symbol", name, "edit text")
        for call in msg.tool_calls():
            read, modified = files_of(call, self.open_file)
            if self.cwd:
                modified = [_in_dir(self.cwd, p) for p in modified]
            self.facts.files_read.extend(FileTouch(i, p, call.name) for p in read)
            self.calls[call.id] = (i, call, modified)
            for kind, value, source in _call_identifiers(call):
                if kind == "dir":  # a created path: known once the result says the call was not declined
                    self.pending_dirs.setdefault(call.id, []).append((i, value, source))
                else:
                    self.identifier(i, kind, value, source)
        for res in msg.tool_results():
            call = self.calls.get(res.call_id, (i, None, []))[1]
            if msg.meta.get("missing_result") or never_returned(call, res):
                continue  # no result was recorded, or the user's next turn answers the call
            self.result(i, res)

    def lint_report(self, report: str) -> None:
        """aider linted the files its edits just wrote and found problems: the edit of each file
        the report names failed (the latest edit when it names none it wrote)."""
        for part in re.split(r"^(?=# Fix any errors below)", report, flags=re.M):
            if not part.strip() or not self.unlinted:
                continue
            named = lint_report_paths(part)
            # A report that names no file is the latest edit's; one that names files only theirs.
            # aider lints a file as it now stands: the latest edit of it is the one that failed.
            latest = {_path_arg(e[1].args): e for e in self.unlinted}
            hits = [e for p, e in latest.items() if p in named] if named else self.unlinted[-1:]
            for at, call, res in hits:
                # The edit did not fix what it looked like fixing: its own lint failed.
                for key, k in self.fixed_by.pop(at, []):
                    self.facts.failures[k] = replace(self.facts.failures[k], fixed_at=None)
                    self.open_failures.setdefault(key, []).append(k)
                self.fail(at, call, res, "lint", lint_report_error(part, _path_arg(call.args)) or "")
                self.unlinted.remove((at, call, res))

    def resolve_earlier(self, cwd: str) -> None:
        """Join the relative paths seen before the harness first printed its working directory
        (SWE-agent's ``create reproduce.py`` comes before any ``(Current directory: …)``), so one
        file is not counted under a relative and an absolute spelling."""
        for touches in (self.facts.files_read, self.facts.files_modified):
            touches[:] = [replace(t, path=_in_dir(cwd, t.path)) for t in touches]
        self.calls = {k: (i, c, [_in_dir(cwd, p) for p in mod]) for k, (i, c, mod) in self.calls.items()}

    def result(self, i: int, res) -> None:
        at, call, modified = self.calls.get(res.call_id, (i, None, []))
        # A poll of a background command reports on that command (failures.Polls).
        subject = self.polls.subject(call)
        self.polls.note(call, res)
        running = running_session(res.output) is not None
        cmd = command_of(subject) if subject else None
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
        elif cmd and is_test_command(cmd) and not running:
            self.facts.untallied_runs.append(i)
        source = failure_source(subject, res, tally)
        failed = source is not None
        for at_dir, value, src in self.pending_dirs.pop(res.call_id, []):
            if source != "rejection":
                self.identifier(at_dir, "dir", value, src)
        for sha in identifiers.HARNESS_COMMIT.findall(res.output) if "Commit " in res.output else ():
            self.identifier(at, "sha", sha, "harness commit")
        reason = rejection_reason(res.output) if failed else None
        if reason:
            self.constraints(i, reason, "rejection reason")
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
        if call is None or running:  # a command still running has neither failed nor succeeded yet
            return
        lint = None if failed else edit_lint_error(call, res.output)
        if not failed and modified:
            self.unlinted.append((i, call, res))
        if not (failed or lint or self.open_failures):
            return
        key = attempt_key(subject)
        if failed:
            error = identifiers.error_string(res.output, refused=res.is_error and not cmd, command=cmd or "")
            self.fail(i, subject, res, source, error)
        elif not lint:
            # Every earlier failure of the same attempt is fixed by this success.
            for k in self.open_failures.pop(key, []):
                self.facts.failures[k] = replace(self.facts.failures[k], fixed_at=i)
                self.fixed_by.setdefault(i, []).append((key, k))
        else:  # the file was written, and the harness's lint found an error in it: nothing fixed
            self.fail(i, call, res, "lint", lint)


def compute_facts(session: Session) -> Facts:
    """Facts of one session, in message order."""
    b = _Builder(session)
    for i, msg in enumerate(session.messages):
        b.message(i, msg)
    for pending in b.pending_dirs.values():  # calls with no recorded result: nothing declined them
        for at, value, src in pending:
            b.identifier(at, "dir", value, src)
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
