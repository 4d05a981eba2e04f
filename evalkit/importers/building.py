"""Building canonical sessions from an importer's records: the session builder, tool pairing
(a call left without its result gets a placeholder result, so every call is answered before the
next assistant turn; a result whose call is not in view is dropped and counted), and the shared
field readers (exit codes, integers, text, arguments, JSON-wrapped tool results, ids)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from evalkit.contracts.session import (
    Block,
    Message,
    Session,
    Source,
    Text,
    ToolCall,
    ToolResult,
)
from evalkit.importers.inputs import ImportReport

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
    earlier: set[str] = set()  # call ids of earlier turns

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
            earlier |= answered
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
                if b.id in earlier:
                    # Some agents number calls per turn (call_1 every time): results still pair
                    # within the turn, but a reader matching ids across the session would not.
                    report.warn(
                        path,
                        line,
                        f"tool call id {b.id} already used in an earlier turn; kept (paired within its turn)",
                        key="tool call id reused across turns",
                    )
                open_calls[b.id] = line
            kept.append(b)
        if kept:
            msg.blocks = kept
            out.append(msg)
    close_open()
    return out


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
