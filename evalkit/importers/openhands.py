"""OpenHands event streams: trajectory JSON (a list of events), evaluation records
(``{instance_id, instruction, history, …}``) as JSON or ``output.jsonl``, and the older flat
history where action arguments sit on the event itself.

Actions pair with observations by ``cause`` (or, without ids, with the next observation); the
exit code is ``extras.metadata.exit_code`` (older: ``exit_code``), ``success: false`` and
``observation: "error"`` mark failures, and so does an editor observation starting ``ERROR:``. ``condensation`` actions are recorded compactions.
Agent state changes, null observations and recall traffic are skipped and counted.
"""

from __future__ import annotations

import re

from evalkit.contracts.session import Compaction, Text, ToolCall, ToolResult
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, as_int, as_text, short_id
from evalkit.importers.inputs import ImportReport, Probe, jsonl_records, require_json

TOOL_ACTIONS = {
    "run": "execute_bash",
    "run_ipython": "execute_ipython_cell",
    "read": "str_replace_editor",
    "edit": "str_replace_editor",
    "write": "str_replace_editor",
    "browse": "browser",
    "browse_interactive": "browser",
    "call_tool_mcp": "mcp",
    "think": "think",
}
SKIP_ACTIONS = {
    "recall",
    "change_agent_state",
    "null",
    "condensation_request",
    "delegate",
    "reject",
    "pause",
    "resume",
    "stop",
}
SKIP_OBS = {"agent_state_changed", "null", "recall", "user_rejected", "delegate"}


def _is_event(e) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e)


def _is_record(d) -> bool:
    return (
        isinstance(d, dict)
        and isinstance(d.get("history"), list)
        and ("instruction" in d or "instance_id" in d)
    )


def detect(probe: Probe) -> bool:
    head = probe.head.lstrip()
    if head[:1] == b"[" and (b'"observation"' in probe.head or b'"action"' in probe.head):
        d = probe.json
        return isinstance(d, list) and bool(d) and all(_is_event(e) for e in d[:5])
    if head[:1] == b"{":
        recs = probe.first_records(2)
        if recs and all(_is_record(r) for r in recs):
            return True
        if b'"history"' in probe.head and (b'"instruction"' in probe.head or b'"instance_id"' in probe.head):
            return _is_record(probe.json)
    return False


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    stem = short_id(path.name.rsplit(".", 1)[0])
    if not probe.jsonl:
        data = require_json(probe, report, (list, dict))
        if data is not None:
            yield from _one(data, report, path, stem, 0)
        return
    for n, d in jsonl_records(path, report):
        yield from _one(d, report, path, f"{stem}:{d.get('instance_id') or n}", n)


def _one(data, report: ImportReport, path, sid: str, line: int):
    meta: dict = {}
    if isinstance(data, dict):
        events = data.get("history")
        for k in ("instance_id", "error"):
            if isinstance(data.get(k), str):
                meta[k] = data[k]
        if isinstance(data.get("instance_id"), str):
            sid = short_id(data["instance_id"])
        instruction = data.get("instruction")
    else:
        events, instruction = data, None
    if not isinstance(events, list):
        report.problem(path, line, "no event list; skipped", key="file skipped")
        return
    b = SessionBuilder(report, "openhands", path, sid, meta=meta)
    if isinstance(instruction, str) and not any(
        isinstance(e, dict) and e.get("source") == "user" and e.get("action") == "message" for e in events
    ):
        b.text("user", instruction, line)
    open_by_id: dict = {}  # action id -> call id
    last_open: list[str] = []
    for i, e in enumerate(events):
        ln = line or i + 1
        where = f"history[{i}]"
        if not isinstance(e, dict):
            report.problem(path, ln, f"{where}: not an event object; skipped", key="not a JSON object")
            continue
        if "action" in e:
            _action(b, e, ln, where, open_by_id, last_open)
        elif "observation" in e:
            _observation(b, e, ln, where, open_by_id, last_open)
        else:
            report.problem(
                path, ln, f"{where}: neither action nor observation; skipped", key="unknown entry type"
            )
    s = b.finish()
    if s:
        yield s


def _action(b: SessionBuilder, e: dict, ln: int, where: str, open_by_id: dict, last_open: list) -> None:
    kind = e.get("action")
    args = (
        e.get("args")
        if isinstance(e.get("args"), dict)
        else {k: v for k, v in e.items() if k not in ("action", "id", "source", "timestamp", "message")}
    )
    source = e.get("source")
    if kind == "system":
        b.text("system", as_text(args.get("content") or e.get("message")), ln)
    elif kind == "message":
        text = as_text(args.get("content") or e.get("message"))
        if source in ("user", "agent"):
            role = "user" if source == "user" else "assistant"
        else:  # the flat legacy history has no source: the first message is the task
            role = "user" if not any(m.role == "user" for m in b.messages) else "assistant"
        b.text(role, text, ln)
    elif kind == "finish":
        text = as_text(args.get("final_thought") or args.get("outputs") or e.get("message"))
        b.text("assistant", text, ln, meta={"finish": True})
    elif kind == "condensation":
        summary = as_text(args.get("summary"))
        b.add(
            "user",
            [Compaction(summary, None, None, "auto")],
            ln,
            {
                "synthetic": True,
                "forgotten_event_ids": args.get("forgotten_event_ids"),
                "forgotten_range": [
                    args.get("forgotten_events_start_id"),
                    args.get("forgotten_events_end_id"),
                ],
            },
        )
    elif kind in TOOL_ACTIONS:
        tcm = e.get("tool_call_metadata") if isinstance(e.get("tool_call_metadata"), dict) else {}
        cid = tcm.get("tool_call_id") or (
            f"{b.session_id}:e{e['id']}" if "id" in e else f"{b.session_id}:l{ln}:{where}"
        )
        name = tcm.get("function_name") or TOOL_ACTIONS[kind]
        call_args = {
            k: v
            for k, v in args.items()
            if k
            in (
                "command",
                "code",
                "path",
                "content",
                "old_str",
                "new_str",
                "file_text",
                "url",
                "thought",
                "insert_line",
                "view_range",
                "start",
                "end",
            )
        }
        if kind == "run_ipython":
            call_args.setdefault("code", args.get("code"))
        if kind in ("read", "edit", "write") and "command" not in call_args:
            call_args["command"] = "view" if kind == "read" else kind
        thought = args.get("thought")
        blocks = [Text(thought)] if isinstance(thought, str) and thought.strip() else []
        blocks.append(ToolCall(str(cid), str(name), call_args))
        b.add("assistant", blocks, ln)
        if "id" in e:
            open_by_id[e["id"]] = str(cid)
        last_open.append(str(cid))
    elif kind in SKIP_ACTIONS:
        b.report.skip(b.path, ln, f"openhands action/{kind}")
    else:
        b.report.problem(b.path, ln, f"{where}: unknown action {kind!r}; skipped", key="unknown entry type")


def _observation(b: SessionBuilder, e: dict, ln: int, where: str, open_by_id: dict, last_open: list) -> None:
    kind = e.get("observation")
    if kind in SKIP_OBS:
        b.report.skip(b.path, ln, f"openhands observation/{kind}")
        return
    cause = e.get("cause")
    cid = open_by_id.pop(cause, None) if cause is not None else (last_open[-1] if last_open else None)
    if cid is None and cause is None and kind == "error":
        # A malformed tool call: the model saw this error as a user-side message.
        b.text(
            "user", as_text(e.get("content") or e.get("message")), ln, synthetic=True, meta={"error": True}
        )
        return
    if cid is None:
        b.report.problem(
            b.path,
            ln,
            f"{where}: observation without its action (cause {cause!r}); dropped",
            key="result without call",
        )
        return
    if cid in last_open:
        last_open.remove(cid)
    extras = e.get("extras") if isinstance(e.get("extras"), dict) else {}
    md = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
    code = as_int(md.get("exit_code", e.get("exit_code", extras.get("exit_code"))))
    out = as_text(e.get("content"))
    suffix = md.get("suffix")
    if isinstance(suffix, str) and suffix.strip():
        out += suffix  # the model saw the exit-code suffix
    # A soft timeout: the command is still running (a server) and has not failed; the harness's
    # ``success: false`` there only restates the -1.
    running = code == -1 and bool(_STILL_RUNNING.search(out))
    if running:
        code = None
    # The file editor reports a refused edit or view as text starting "ERROR:" with no flag set.
    editor_error = kind in ("edit", "read") and out.lstrip().startswith("ERROR:")
    flagged = e.get("success") is False and not running
    is_error = kind == "error" or flagged or code not in (None, 0) or editor_error
    b.add("tool", [ToolResult(cid, out, is_error, code)], ln)


# OpenHands returns -1 when a command printed nothing new for a while and is left running; the
# agent may wait, send input or interrupt it. No exit has happened yet.
_STILL_RUNNING = re.compile(r"\[The command has no new output after \d+ seconds")


IMPORTER = register(
    Importer(
        "openhands", "OpenHands event stream / trajectory JSON and evaluation output.jsonl", detect, read
    )
)
