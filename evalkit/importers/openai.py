"""Plain OpenAI chat-completions messages: a JSON array, ``{"messages": […]}``, or JSONL.

JSONL is read either as one message per line (one session per file) or as one
``{"messages": […]}`` object per line (one session per line). Mapping (tool calls, ``role: tool``
answers, legacy ``function_call``) is :class:`~evalkit.importers.openai_style.OpenAIMapper`'s.
"""

from __future__ import annotations

from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, short_id
from evalkit.importers.inputs import ImportReport, Probe, jsonl_records, require_json
from evalkit.importers.openai_style import OpenAIMapper

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def _is_message(d) -> bool:
    return isinstance(d, dict) and d.get("role") in ROLES


def detect(probe: Probe) -> bool:
    head = probe.head.lstrip()
    if head[:1] == b"[":
        data = probe.json
        return isinstance(data, list) and bool(data) and all(_is_message(m) for m in data[:5])
    recs = probe.first_records(3)
    if recs and all(_is_message(r) or isinstance(r.get("messages"), list) for r in recs):
        return True
    if head[:1] == b"{" and not probe.jsonl and b'"messages"' in probe.head:
        data = probe.json
        return isinstance(data, dict) and isinstance(data.get("messages"), list)
    return False


def session_from_messages(
    messages: list, report: ImportReport, fmt: str, path, sid: str, meta: dict | None = None, line: int = 0
):
    """One session from a list of OpenAI-style messages (also used by the hf importer)."""
    b = SessionBuilder(report, fmt, path, sid, meta=meta or {})
    mapper = OpenAIMapper(b)
    for i, m in enumerate(messages):
        mapper.add(m, line or i + 1, f"messages[{i}]")
    return b.finish()


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    sid = short_id(path.name.split(".")[0])
    if not probe.jsonl:
        data = require_json(probe, report, (list, dict))
        if data is None:
            return
        msgs = data.get("messages") if isinstance(data, dict) else data
        if not isinstance(msgs, list):
            report.problem(path, 0, "no messages list; file skipped", key="file skipped")
            return
        meta = (
            {k: v for k, v in data.items() if k != "messages" and isinstance(v, str | int | float)}
            if isinstance(data, dict)
            else {}
        )
        s = session_from_messages(msgs, report, "openai", path, sid, meta)
        if s:
            yield s
        return
    # JSONL: messages one per line, or whole conversations one per line.
    b = None
    mapper = None
    for n, d in jsonl_records(path, report):
        if isinstance(d.get("messages"), list):
            s = session_from_messages(d["messages"], report, "openai", path, f"{sid}:{n}", line=n)
            if s:
                yield s
            continue
        if b is None:
            b = SessionBuilder(report, "openai", path, sid)
            mapper = OpenAIMapper(b)
        mapper.add(d, n, f"line {n}")
    if b is not None:
        s = b.finish()
        if s:
            yield s


IMPORTER = register(
    Importer(
        "openai",
        'OpenAI chat messages: JSON array, {"messages": …}, or JSONL (tool_calls, legacy function_call)',
        detect,
        read,
    )
)
