"""What every importer shares: the import report, input probing, JSONL reading, session building,
the OpenAI-style message mapping, tool pairing and exit-code parsing.

Importers are small because the hard parts live here once: a bad record is reported with file,
line and reason and counted; a call left without its result gets a placeholder result so the
canonical invariant (every call answered before the next assistant turn) holds; a result whose
call is not in view is dropped and counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from evalkit.corpus import jsonl_lines
from evalkit.session import (
    Block,
    Compaction,
    Message,
    Session,
    Source,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
)

HEAD_BYTES = 64 * 1024
# A whole-file JSON format above this is refused instead of loaded (JSONL formats stream).
MAX_JSON_BYTES = 512 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024 * 1024
KEEP_ISSUES = 500  # issues kept verbatim for printing; all are counted
UNRECOGNISED = "input not imported"


@dataclass(frozen=True, slots=True)
class Issue:
    """One record an importer could not use: where it is and why."""

    path: str
    line: int  # 0 when the issue concerns the whole file
    reason: str
    kind: str = "problem"  # "problem" (bad input) | "skipped" (ignored by design)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


@dataclass
class ImportReport:
    """What an import found and what it could not use, counted by reason."""

    files: int = 0
    sessions: int = 0
    messages: int = 0
    tool_calls: int = 0
    failing_results: int = 0
    compactions: int = 0
    formats: Counter = field(default_factory=Counter)
    problems: Counter = field(default_factory=Counter)  # bad input, by reason
    skipped: Counter = field(default_factory=Counter)  # records ignored by design, by reason
    redactions: Counter = field(default_factory=Counter)
    issues: list[Issue] = field(default_factory=list)
    issue_count: int = 0

    def _add(self, issue: Issue, key: str) -> None:
        (self.problems if issue.kind == "problem" else self.skipped)[key] += 1
        self.issue_count += 1
        if len(self.issues) < KEEP_ISSUES:
            self.issues.append(issue)

    def problem(self, path: Path | str, line: int, reason: str, key: str | None = None) -> None:
        """Bad input: counted under ``key`` (default: the reason), kept with file and line."""
        self._add(Issue(str(path), line, reason, "problem"), key or reason)

    def skip(self, path: Path | str, line: int, reason: str, key: str | None = None) -> None:
        """A record ignored by design (progress lines, snapshots, UI events): counted under ``key``
        (default: the reason), kept with file and line."""
        self._add(Issue(str(path), line, reason, "skipped"), key or reason)

    def unrecognised(self) -> list[Issue]:
        """The input files no importer took, each with why (kept issues only)."""
        return [
            i
            for i in self.issues
            if i.kind == "skipped" and i.line == 0 and i.reason.startswith(UNRECOGNISED)
        ]

    def count_session(self, s: Session) -> None:
        self.sessions += 1
        self.formats[s.source.format] += 1
        self.messages += len(s.messages)
        for m in s.messages:
            for b in m.blocks:
                if isinstance(b, ToolCall):
                    self.tool_calls += 1
                elif isinstance(b, ToolResult) and (b.is_error or b.exit_code not in (None, 0)):
                    self.failing_results += 1
                elif isinstance(b, Compaction):
                    self.compactions += 1

    def issues_at(self, path: Path | str, line: int | None = None) -> list[Issue]:
        return [i for i in self.issues if i.path == str(path) and (line is None or i.line == line)]

    def to_dict(self) -> dict:
        return {
            "files": self.files,
            "sessions": self.sessions,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "failing_results": self.failing_results,
            "compactions": self.compactions,
            "formats": dict(self.formats),
            "problems": dict(self.problems),
            "skipped": dict(self.skipped),
            "redactions": dict(self.redactions),
            "issues": [str(i) for i in self.issues if i.kind == "problem"],
        }

    def summary(self) -> str:
        """The import summary printed by ``evalkit import``."""
        out = [
            f"imported {self.sessions} sessions from {self.files} inputs "
            f"({', '.join(f'{k}: {v}' for k, v in sorted(self.formats.items())) or 'none'})",
            f"  messages {self.messages}, tool calls {self.tool_calls}, failing results "
            f"{self.failing_results}, recorded compactions {self.compactions}",
        ]
        if self.problems:
            out.append(f"  problems ({sum(self.problems.values())}, records dropped or repaired):")
            out += [f"    {n:6}  {k}" for k, n in self.problems.most_common()]
        if self.skipped:
            out.append(f"  skipped by design ({sum(self.skipped.values())}):")
            out += [f"    {n:6}  {k}" for k, n in self.skipped.most_common()]
        if self.redactions:
            out.append(f"  redactions ({sum(self.redactions.values())}):")
            out += [f"    {n:6}  {k}" for k, n in self.redactions.most_common()]
        return "\n".join(out)


# --------------------------------------------------------------------------- probing inputs


class Probe:
    """One input (file or folder) with its first bytes and a cached whole-file JSON parse.

    Detection and import share the probe so a JSON file is parsed once.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)

    @cached_property
    def head(self) -> bytes:
        if not self.path.is_file():
            return b""
        with open(self.path, "rb") as fh:
            return fh.read(HEAD_BYTES)

    @cached_property
    def head_text(self) -> str:
        return self.head.decode("utf-8", errors="replace")

    def looks_json(self) -> bool:
        return self.head.lstrip()[:1] in (b"{", b"[")

    _json_error: str | None = None

    @cached_property
    def json(self) -> Any:
        """The file parsed as one JSON value, or None (with ``json_error`` set)."""
        if not self.looks_json():
            self._json_error = "not JSON"
            return None
        if self.path.stat().st_size > MAX_JSON_BYTES:
            self._json_error = f"file larger than {MAX_JSON_BYTES} bytes"
            return None
        raw = self.path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self._json_error = f"not UTF-8 at byte {e.start}"
            text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            truncated = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
            self._json_error = (
                "truncated JSON" if truncated else "malformed JSON"
            ) + f": {e.msg} at line {e.lineno}"
            return None
        except RecursionError:
            self._json_error = "JSON nested too deeply"
            return None

    @property
    def json_error(self) -> str | None:
        _ = self.json
        return self._json_error

    @cached_property
    def jsonl(self) -> bool:
        """True when one of the first non-blank lines is a whole JSON object by itself (JSON Lines).

        Looking past the first line keeps a JSONL file with a damaged first record JSONL.
        """
        if not self.path.is_file():
            return False
        seen = 0
        with open(self.path, "rb") as fh:
            while seen < 5:
                raw = fh.readline(MAX_LINE_BYTES)
                if not raw:
                    return False
                if not raw.strip():
                    continue
                seen += 1
                try:
                    if isinstance(json.loads(raw), dict):
                        return True
                except (ValueError, RecursionError):
                    pass
        return False

    def first_records(self, n: int = 5) -> list[dict]:
        """Up to ``n`` JSON objects from the first 50 lines (for JSONL detection). Whole lines, not
        the 64 KiB head: a first record longer than the head (a pasted file) still counts."""
        out: list[dict] = []
        if not self.path.is_file():
            return out
        with open(self.path, "rb") as fh:
            lines = [fh.readline(MAX_LINE_BYTES) for _ in range(50)]
        for raw in lines:
            if not raw.strip():
                continue
            try:
                d = json.loads(raw)
            except ValueError:
                continue
            if isinstance(d, dict):
                out.append(d)
            if len(out) >= n:
                break
        return out


def require_json(probe: Probe, report: ImportReport, want: type | tuple[type, ...]) -> Any:
    """The probe's JSON if it has the wanted type; else a problem naming the file, and None."""
    data = probe.json
    if data is None:
        report.problem(
            probe.path,
            0,
            f"file skipped: {probe.json_error}",
            key=f"file skipped: {(probe.json_error or '').split(':')[0]}",
        )
        return None
    if not isinstance(data, want):
        report.problem(probe.path, 0, f"file skipped: unexpected top-level JSON {type(data).__name__}")
        return None
    if probe._json_error:  # parsed, but only after replacing bad bytes
        report.problem(
            probe.path, 0, f"{probe._json_error}; bad bytes replaced", key="non-UTF-8 bytes replaced"
        )
    return data


def decode_reported(raw: bytes, path, n: int, report: ImportReport) -> str:
    """A line as text; bytes that are not UTF-8 become replacement characters and are reported."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        report.problem(
            path, n, f"non-UTF-8 bytes at byte {e.start}; replaced", key="non-UTF-8 bytes replaced"
        )
        return raw.decode("utf-8", errors="replace")


def jsonl_records(path: Path, report: ImportReport) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each JSONL line, split on ``\\n`` only, streamed.

    Raw U+2028 inside JSON strings is valid JSON, so ``str.splitlines`` must not be used. A line
    that is not UTF-8 is decoded with replacement characters and reported; a line that is not a
    JSON object is reported and skipped.
    """
    for n, raw in jsonl_lines(path, MAX_LINE_BYTES):
        if raw is None:
            report.problem(path, n, f"record larger than {MAX_LINE_BYTES} bytes", key="oversized record")
            continue
        if not raw.strip():
            continue
        text = decode_reported(raw, path, n, report)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            truncated = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
            key = "truncated JSON line" if truncated else "malformed JSON line"
            report.problem(path, n, f"{key}: {e.msg} at column {e.colno}", key=key)
            continue
        except RecursionError:
            report.problem(path, n, "JSON nested too deeply", key="malformed JSON line")
            continue
        if not isinstance(obj, dict):
            report.problem(
                path, n, f"expected a JSON object, got {type(obj).__name__}", key="not a JSON object"
            )
            continue
        yield n, obj


# --------------------------------------------------------------------------- building sessions


_EXIT_PATTERNS = [
    re.compile(r"\AExit code:? (-?\d+)\b"),  # Claude Code prefix; Codex shell_command "Exit code: 1"
    re.compile(r"^Exit code: (-?\d+)$", re.M),
    re.compile(r"Process exited with code (-?\d+)"),  # Codex exec_command
    re.compile(r"\[The command completed with exit code (-?\d+)\.\]"),  # OpenHands suffix
]


def exit_code_from_text(text: str) -> int | None:
    """The exit code a harness wrote into a tool's output text, if it wrote one."""
    for pat in _EXIT_PATTERNS:
        m = pat.search(text)
        if m:
            return int(m.group(1))
    return None


def as_int(v: Any) -> int | None:
    """An integer field from outside data (bools and non-numbers are None)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v.strip()):
        return int(v)
    return None


def as_text(v: Any) -> str:
    """Text of a content field: a string, or a list of parts whose text is joined."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts = []
        for p in v:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                t = p.get("text", p.get("content", p.get("output")))
                if isinstance(t, str):
                    parts.append(t)
                elif isinstance(t, list):
                    parts.append(as_text(t))
                elif p.get("type") in ("image", "image_url", "input_image"):
                    parts.append("[image]")
        return "\n".join(parts)
    if isinstance(v, dict):
        return as_text([v])
    return str(v)


def parse_args(raw: Any) -> dict:
    """Tool-call arguments as an object: JSON strings decoded; anything else kept under ``input``."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            v = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"input": raw}
        return v if isinstance(v, dict) else {"input": v}
    if raw is None:
        return {}
    return {"input": raw}


MISSING_RESULT = "[no result recorded: the session ended or was interrupted before this call returned]"


class SessionBuilder:
    """Collects messages of one session, then repairs tool pairing and assigns stable ids.

    Message ids are ``<session id>:m<index>`` over the final message list, so re-importing the
    same file yields the same ids.
    """

    def __init__(
        self,
        report: ImportReport,
        fmt: str,
        path: Path | str,
        session_id: str,
        origin: str = "",
        meta: dict | None = None,
    ):
        self.report, self.fmt, self.path = report, fmt, str(path)
        self.session_id = session_id
        self.origin = origin
        self.meta: dict = meta or {}
        self.messages: list[Message] = []
        self._lines: list[int] = []

    def add(self, role: str, blocks: list[Block], line: int = 0, meta: dict | None = None) -> Message | None:
        """Append a message (empty block lists are dropped); returns it so callers can extend it."""
        if not blocks:
            return None
        msg = Message("", role, list(blocks), dict(meta) if meta else {})  # type: ignore[arg-type]
        self.messages.append(msg)
        self._lines.append(line)
        return msg

    def text(self, role: str, text: str, line: int = 0, synthetic: bool = False, meta: dict | None = None):
        if text and text.strip():
            return self.add(role, [Text(text, synthetic)], line, meta)
        return None

    def result(
        self, call_id: str, output: str, is_error: bool = False, exit_code: int | None = None, line: int = 0
    ):
        """A tool message holding one result; the exit code falls back to the output text."""
        if exit_code is None:
            exit_code = exit_code_from_text(output)
        return self.add("tool", [ToolResult(call_id, output, bool(is_error), exit_code)], line)

    def last(self, role: str | None = None) -> Message | None:
        for m in reversed(self.messages):
            if role is None or m.role == role:
                return m
        return None

    def finish(self) -> Session | None:
        """The session with pairing repaired and ids assigned; None when it has no messages."""
        msgs = repair_tool_pairs(self.messages, self._lines, self.report, self.path)
        if not msgs:
            self.report.problem(self.path, 0, f"session {self.session_id}: no messages", key="empty session")
            return None
        for i, m in enumerate(msgs):
            m.id = f"{self.session_id}:m{i:05d}"
        return Session(self.session_id, Source(self.fmt, self.path, self.origin), msgs, self.meta)


def repair_tool_pairs(
    messages: list[Message], lines: list[int], report: ImportReport, path: str
) -> list[Message]:
    """Restore the canonical invariant, counting every repair.

    A result whose call is not open (never made, or already answered) is dropped as a problem; a
    call with no result before the next assistant turn gets a synthetic error result marked
    ``meta.synthetic`` — the recording harness would have shown the model an error there too.
    """
    out: list[Message] = []
    open_calls: dict[str, int] = {}  # call id -> source line
    answered: set[str] = set()

    def close_open() -> None:
        for cid, line in open_calls.items():
            report.problem(
                path, line, f"tool call {cid} has no result; placeholder added", key="call without result"
            )
            out.append(
                Message(
                    "",
                    "tool",
                    [ToolResult(cid, MISSING_RESULT, True, None)],
                    {"synthetic": True, "missing_result": True},
                )
            )
        open_calls.clear()

    for msg, line in zip(messages, lines, strict=True):
        if msg.role == "assistant":
            close_open()
            answered = set()
        kept: list[Block] = []
        for b in msg.blocks:
            if isinstance(b, ToolResult):
                if b.call_id in open_calls:
                    del open_calls[b.call_id]
                    answered.add(b.call_id)
                elif b.call_id in answered:
                    report.problem(
                        path, line, f"second result for call {b.call_id}; dropped", key="duplicate result"
                    )
                    continue
                else:
                    report.problem(
                        path, line, f"result for unknown call {b.call_id}; dropped", key="result without call"
                    )
                    continue
            elif isinstance(b, ToolCall):
                if b.id in open_calls or b.id in answered:
                    report.problem(
                        path, line, f"tool call id {b.id} repeated; dropped", key="duplicate call id"
                    )
                    continue
                open_calls[b.id] = line
            kept.append(b)
        if kept:
            msg.blocks = kept
            out.append(msg)
    close_open()
    return out


# --------------------------------------------------------------------------- OpenAI-style messages

ROLE_MAP = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}


class OpenAIMapper:
    """Maps OpenAI-style chat messages (and the dialects that copy them) into a builder.

    Handles ``tool_calls`` (``function`` as an object with JSON-string ``arguments`` or, as in
    Inspect, a name with an ``arguments`` object), ``role: tool`` answers by ``tool_call_id`` (or
    SWE-agent's ``tool_call_ids`` list), the legacy ``function_call`` / ``role: function`` pair,
    ``reasoning``/``thinking`` content parts and Inspect's tool ``error``.
    """

    def __init__(self, builder: SessionBuilder):
        self.b = builder
        self._legacy = 0
        self._open_legacy: list[tuple[str, str]] = []  # (name, synthesized id)

    def add(self, m: Any, line: int = 0, where: str = "", synthetic: bool = False) -> None:
        rep, path = self.b.report, self.b.path
        if not isinstance(m, dict):
            rep.problem(
                path,
                line,
                f"{where}: expected a message object, got {type(m).__name__}",
                key="not a message object",
            )
            return
        raw_role = m.get("role")
        role = ROLE_MAP.get(raw_role) if isinstance(raw_role, str) else None
        if role is None:
            rep.problem(
                path, line, f"{where}: unknown role {raw_role!r}; message skipped", key="unknown role"
            )
            return
        content = m.get("content")
        if role == "tool":
            self._tool(m, role_raw=raw_role, line=line, where=where)
            return
        blocks: list[Block] = []
        reasoning = m.get("reasoning_content") or m.get("reasoning")
        if isinstance(reasoning, str) and reasoning.strip():
            blocks.append(Thinking(reasoning))
        if isinstance(content, list):
            for p in content:
                if isinstance(p, dict) and p.get("type") in ("reasoning", "thinking"):
                    t = p.get("reasoning", p.get("thinking", p.get("text", "")))
                    if isinstance(t, str) and t.strip():
                        blocks.append(Thinking(t))
                else:
                    t = as_text([p])
                    if t.strip():
                        blocks.append(Text(t, synthetic))
        else:
            t = as_text(content)
            if t.strip():
                blocks.append(Text(t, synthetic))
        if role == "assistant":
            for i, tc in enumerate(m.get("tool_calls") or []):
                call = self._call(tc, f"{where}.tool_calls[{i}]", line)
                if call:
                    blocks.append(call)
            fc = m.get("function_call")
            if isinstance(fc, dict) and isinstance(fc.get("name"), str):
                self._legacy += 1
                cid = f"function_call_{self._legacy}"
                self._open_legacy.append((fc["name"], cid))
                blocks.append(ToolCall(cid, fc["name"], parse_args(fc.get("arguments"))))
        meta = {"synthetic": True} if synthetic else None
        if not blocks and role == "assistant" and content in (None, "", []):
            return  # an empty assistant turn carries nothing to replay
        self.b.add(role, blocks, line, meta)

    def _call(self, tc: Any, where: str, line: int) -> ToolCall | None:
        rep, path = self.b.report, self.b.path
        if not isinstance(tc, dict):
            rep.problem(path, line, f"{where}: not an object; skipped", key="malformed tool call")
            return None
        fn = tc.get("function")
        if isinstance(fn, dict):
            name, args = fn.get("name"), fn.get("arguments")
        else:
            name, args = fn, tc.get("arguments")
        cid = tc.get("id")
        if not isinstance(name, str) or not isinstance(cid, str) or not cid:
            rep.problem(
                path,
                line,
                f"{where}: tool call without id or function name; skipped",
                key="malformed tool call",
            )
            return None
        return ToolCall(cid, name, parse_args(args))

    def _tool(self, m: dict, role_raw: str, line: int, where: str) -> None:
        output = as_text(m.get("content"))
        output, exit_code, envelope_error = unwrap_envelope(output)
        err = m.get("error") or envelope_error
        is_error = bool(err)
        if isinstance(err, dict) and err.get("message"):
            # Inspect: the model saw the error message; keep it in the output.
            output = output or str(err.get("message"))
        if role_raw == "function":
            name = m.get("name")
            idx = next(
                (k for k, (n, _) in enumerate(self._open_legacy) if n == name),
                0 if self._open_legacy else None,
            )
            if idx is None:
                self.b.report.problem(
                    self.b.path,
                    line,
                    f"{where}: function result without a function_call; dropped",
                    key="result without call",
                )
                return
            _, cid = self._open_legacy.pop(idx)
            self.b.result(cid, output, is_error, exit_code, line=line)
            return
        ids = m.get("tool_call_ids") if isinstance(m.get("tool_call_ids"), list) else [m.get("tool_call_id")]
        ids = [i for i in ids if isinstance(i, str) and i]
        if not ids:
            self.b.report.problem(
                self.b.path,
                line,
                f"{where}: tool message without tool_call_id; dropped",
                key="result without call",
            )
            return
        for cid in ids:
            self.b.result(cid, output, is_error, exit_code, line=line)


_ENVELOPE_KEYS = {"output", "exit_code", "error", "returncode", "stdout", "stderr", "status"}


def unwrap_envelope(content: str) -> tuple[str, int | None, str | None]:
    """(output, exit code, error) of a tool result an agent wrapped as a JSON object
    (``{"output": …, "exit_code": N, "error": …}``, hermes-agent's shape); plain text unchanged.

    Kept as one escaped string, the runner's tally and the exit code would be invisible."""
    text = content.strip()
    if not (text.startswith("{") and text.endswith("}") and '"' in text):
        return content, None, None
    try:
        obj = json.loads(text)
    except ValueError:
        return content, None, None
    if (
        not isinstance(obj, dict)
        or not obj
        or not set(obj) <= _ENVELOPE_KEYS
        or not (set(obj) & {"output", "stdout"})
    ):
        return content, None, None
    parts = [as_text(obj.get(k)) for k in ("output", "stdout", "stderr") if obj.get(k)]
    code = as_int(obj.get("exit_code", obj.get("returncode")))
    err = obj.get("error")
    err_text = as_text(err) if err else None
    if err_text:
        parts.append(err_text)
    return "\n".join(parts), code, err_text


def short_id(text: str) -> str:
    """A filesystem- and id-safe form of a name (session ids built from file names)."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", text)[:120] or "session"
