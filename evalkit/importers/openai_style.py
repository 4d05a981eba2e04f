"""OpenAI-style chat messages (and the dialects that copy them) mapped into a session builder."""

from __future__ import annotations

from typing import Any

from evalkit.contracts.session import (
    Block,
    Text,
    Thinking,
    ToolCall,
)
from evalkit.importers.building import SessionBuilder, as_text, parse_args, unwrap_envelope

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
