"""Gemini CLI session JSON (``~/.gemini/tmp/<project hash>/chats/session-*.json``).

One file is one session: ``{sessionId, projectHash, startTime, lastUpdated, messages: […]}``.
A message's ``type`` is ``user`` (the human's input), ``gemini`` (the model: ``content`` text,
``thoughts`` as thinking, ``toolCalls`` each carrying its own result), or ``info``/``error``/
``warning`` (the CLI's own notices, counted as skipped). A tool call's result is a list of
``functionResponse`` parts whose ``response`` holds ``output`` or ``error``; its ``status`` is
``success``, ``error`` or ``cancelled`` (the user declined it), the last two being failing results.
Gemini CLI writes no exit codes outside the shell tool's output text and no compaction records
in this file.
"""

from __future__ import annotations

import json

from evalkit.contracts.session import Text, Thinking, ToolCall
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, as_text, parse_args, short_id
from evalkit.importers.inputs import ImportReport, Probe

_NOTICES = ("info", "error", "warning")


def detect(probe: Probe) -> bool:
    d = probe.json
    return (
        isinstance(d, dict)
        and "sessionId" in d
        and "projectHash" in d
        and isinstance(d.get("messages"), list)
    )


def _result_text(call: dict) -> tuple[str, bool]:
    """The text the model was shown for a call, and whether the response was an error."""
    parts, error = [], False
    for part in call.get("result") or []:
        resp = (part.get("functionResponse") or {}).get("response") if isinstance(part, dict) else None
        if isinstance(resp, dict):
            if resp.get("error"):
                error = True
                parts.append(as_text(resp["error"]))
            elif "output" in resp:
                parts.append(as_text(resp["output"]))
            else:
                parts.append(json.dumps(resp))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    text = "\n".join(p for p in parts if p)
    if not text and isinstance(call.get("resultDisplay"), str):
        text = call["resultDisplay"]
    return text, error


def read(probe: Probe, report: ImportReport, options: dict):
    d = probe.json
    path = probe.path
    sid = short_id(str(d.get("sessionId") or path.stem))
    b = SessionBuilder(report, "gemini-cli", path, sid, meta={"started": d.get("startTime")})
    for n, m in enumerate(d["messages"], 1):
        if not isinstance(m, dict):
            report.problem(path, n, f"messages[{n - 1}]: not an object", key="gemini-cli bad message")
            continue
        kind = m.get("type")
        if kind == "user":
            b.text("user", as_text(m.get("content")), n)
        elif kind == "gemini":
            if m.get("model"):
                b.meta.setdefault("model", m["model"])
            blocks = []
            for t in m.get("thoughts") or []:
                if isinstance(t, dict):
                    blocks.append(Thinking(f"{t.get('subject', '')}: {t.get('description', '')}".strip()))
            text = as_text(m.get("content"))
            if text.strip():
                blocks.append(Text(text))
            calls = [c for c in m.get("toolCalls") or [] if isinstance(c, dict)]
            for k, c in enumerate(calls):
                blocks.append(
                    ToolCall(
                        str(c.get("id") or f"{sid}:{n}:{k}"),
                        str(c.get("name", "")),
                        parse_args(c.get("args")),
                    )
                )
            b.add("assistant", blocks, n)
            for k, c in enumerate(calls):
                out, error = _result_text(c)
                status = c.get("status")
                b.result(
                    str(c.get("id") or f"{sid}:{n}:{k}"),
                    out,
                    is_error=error or status in ("error", "cancelled"),
                    line=n,
                )
        elif kind in _NOTICES:
            report.skip(path, n, f"gemini-cli {kind} notice", key=f"gemini-cli {kind} notice")
        else:
            report.problem(
                path, n, f"messages[{n - 1}].type: unknown {kind!r}", key="gemini-cli unknown type"
            )
    s = b.finish()
    if s:
        yield s


register(
    Importer(
        "gemini-cli",
        "Gemini CLI session JSON (messages with tool calls that carry their own results)",
        detect,
        read,
    )
)
