"""Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

``response_item`` lines are the replayable history; ``event_msg`` lines are UI telemetry that
mostly repeat them, so only ``exec_command_end`` (exit codes) and ``turn_aborted`` are used and
the rest are counted as skipped. Calls pair with outputs by ``call_id``. A ``compacted`` line is
a :class:`Compaction` whose message meta keeps the ``replacement_history`` texts (what Codex itself
kept); a ``turn_aborted`` answers the calls still open with an aborted result and adds a
synthetic interruption notice. ``web_search_call`` items become a ``web_search`` call (with the
query) answered by its status; a ``patch_apply_end`` with ``success: false``, a call the user
rejected and "apply_patch verification failed" are failing results.
"""

from __future__ import annotations

import json
import re

from evalkit.contracts.session import Compaction, Thinking, ToolCall, ToolResult
from evalkit.importers import Importer, register
from evalkit.importers.building import (
    SessionBuilder,
    as_int,
    as_text,
    exit_code_from_text,
    parse_args,
    short_id,
)
from evalkit.importers.inputs import ImportReport, Probe, jsonl_records

LINE_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
# Output text of a call the user declined or a patch that did not apply (no exit code is written).
_REFUSED = re.compile(
    r"rejected by user|apply_patch verification failed|patch rejected|declined by user", re.I
)
_SYNTHETIC = re.compile(
    r"^\s*(?:<environment_context>|<user_instructions>|<permissions instructions>|# AGENTS\.md instructions|"
    r"<user_shell_command>|<turn_aborted>|<subagent_notification>)"
)


def detect(probe: Probe) -> bool:
    recs = probe.first_records(5)
    return bool(recs) and all(
        isinstance(r.get("type"), str) and r["type"] in LINE_TYPES and "payload" in r for r in recs
    )


def _output(payload: dict) -> tuple[str, int | None]:
    """Output text and exit code of a function_call_output (string, JSON string or content list)."""
    out = payload.get("output")
    code = None
    if isinstance(out, dict):  # {"content": …, "success": …} in some builds
        out = out.get("content", out.get("output", ""))
    if isinstance(out, str) and out.startswith("{"):
        try:
            d = json.loads(out)
        except ValueError:
            d = None
        if isinstance(d, dict) and "output" in d:
            code = (
                as_int((d.get("metadata") or {}).get("exit_code"))
                if isinstance(d.get("metadata"), dict)
                else None
            )
            out = as_text(d.get("output"))
    text = as_text(out)
    return text, code if code is not None else exit_code_from_text(text)


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    b = SessionBuilder(report, "codex", path, short_id(path.stem), meta={})
    exits: dict[str, tuple[int | None, str]] = {}  # call_id -> (exit code, status) from exec_command_end
    results: dict[str, tuple] = {}  # call_id -> (message, block index) to patch a late exec_command_end
    open_calls: list[str] = []
    last_tokens: int | None = None
    for n, e in jsonl_records(path, report):
        t, p = e.get("type"), e.get("payload")
        if not isinstance(t, str) or t not in LINE_TYPES:
            report.problem(path, n, f"unknown line type {t!r}; skipped", key="unknown entry type")
            continue
        if not isinstance(p, dict):
            report.problem(path, n, f"{t} line without a payload object; skipped", key="missing payload")
            continue
        if t == "session_meta":
            if isinstance(p.get("id"), str):
                b.session_id = short_id(p["id"])
            for k in ("cwd", "cli_version", "originator", "model_provider", "source"):
                if isinstance(p.get(k), str | int):
                    b.meta[k] = p[k]
        elif t == "turn_context":
            if isinstance(p.get("model"), str):
                b.meta.setdefault("model", p["model"])
        elif t == "compacted":
            kept = []
            for item in p.get("replacement_history") or []:
                if isinstance(item, dict) and item.get("type") == "message":
                    kept.append({"role": item.get("role"), "text": as_text(item.get("content"))})
            msg = b.add(
                "user",
                [Compaction(as_text(p.get("message")), last_tokens, None, "unknown")],
                n,
                {"synthetic": True},
            )
            if msg is not None and p.get("replacement_history") is not None:
                msg.meta["replacement_history"] = kept
        elif t == "event_msg":
            kind = p.get("type")
            if kind in ("exec_command_end", "patch_apply_end") and isinstance(p.get("call_id"), str):
                code, status = as_int(p.get("exit_code")), str(p.get("status") or "")
                if kind == "patch_apply_end" and p.get("success") is False:
                    status = "failed"  # a patch that did not apply: no exit code, a failure
                exits[p["call_id"]] = (code, status)
                if p["call_id"] in results:  # the output line came first: patch its exit code
                    msg, k = results[p["call_id"]]
                    old = msg.blocks[k]
                    msg.blocks[k] = ToolResult(
                        old.call_id,
                        old.output,
                        old.is_error or status == "failed" or code not in (None, 0),
                        code,
                    )
            elif kind == "turn_aborted":
                for cid in open_calls:
                    b.add(
                        "tool",
                        [ToolResult(cid, f"[aborted: {p.get('reason', 'interrupted')}]", True, None)],
                        n,
                        {"synthetic": True},
                    )
                open_calls.clear()
                b.text(
                    "user",
                    f"[turn aborted: {p.get('reason', 'interrupted')}]",
                    n,
                    synthetic=True,
                    meta={"interrupted": True},
                )
            elif kind == "token_count" and isinstance(p.get("info"), dict):
                usage = p["info"].get("last_token_usage") or {}
                last_tokens = as_int(usage.get("input_tokens")) if isinstance(usage, dict) else last_tokens
                report.skip(path, n, "codex event_msg/token_count")
            else:
                report.skip(path, n, f"codex event_msg/{kind}")
        else:
            _item(b, p, n, exits, results, open_calls)
    s = b.finish()
    if s:
        yield s


def _item(b: SessionBuilder, p: dict, n: int, exits: dict, results: dict, open_calls: list) -> None:
    kind = p.get("type")
    rep, path = b.report, b.path
    if kind == "message":
        role = p.get("role") if isinstance(p.get("role"), str) else None
        role = {"developer": "system"}.get(role, role)
        if role not in ("user", "assistant", "system"):
            rep.problem(path, n, f"message with unknown role {p.get('role')!r}; skipped", key="unknown role")
            return
        text = as_text(p.get("content"))
        b.text(role, text, n, synthetic=role == "user" and bool(_SYNTHETIC.match(text)))
    elif kind == "reasoning":
        text = as_text(p.get("summary")) or as_text(p.get("content"))
        if text.strip():
            _assistant_block(b, Thinking(text), n)
        else:
            rep.skip(path, n, "codex encrypted reasoning")
    elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
        cid = p.get("call_id") or p.get("id")
        if not isinstance(cid, str):
            rep.problem(path, n, f"{kind} without call_id; skipped", key="malformed tool call")
            return
        if kind == "function_call":
            call = ToolCall(cid, str(p.get("name", "")), parse_args(p.get("arguments")))
        elif kind == "custom_tool_call":
            call = ToolCall(cid, str(p.get("name", "")), {"input": as_text(p.get("input"))})
        else:
            action = p.get("action") if isinstance(p.get("action"), dict) else {}
            call = ToolCall(cid, "local_shell", {"command": action.get("command")})
        _assistant_block(b, call, n)
        open_calls.append(cid)
    elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        cid = p.get("call_id")
        if not isinstance(cid, str):
            rep.problem(path, n, f"{kind} without call_id; skipped", key="result without call")
            return
        text, code = _output(p)
        status = ""
        if cid in exits:
            code, status = exits[cid]
        failed = status == "failed" or code not in (None, 0) or bool(_REFUSED.search(text[:2000]))
        msg = b.add("tool", [ToolResult(cid, text, failed, code)], n)
        results[cid] = (msg, 0)
        if cid in open_calls:
            open_calls.remove(cid)
    elif kind == "web_search_call":
        # The search runs on the server: the rollout holds the query and a status, no output.
        action = p.get("action") if isinstance(p.get("action"), dict) else {}
        cid = str(p.get("id") or f"{b.session_id}:web{len(b.messages)}")
        args = {k: v for k, v in action.items() if k != "type" and isinstance(v, str | list)}
        _assistant_block(b, ToolCall(cid, "web_search", args), n)
        status = str(p.get("status") or "completed")
        b.add("tool", [ToolResult(cid, f"[web search {status}]", status == "failed", None)], n)
    else:
        rep.skip(path, n, f"codex response_item/{kind}")


def _assistant_block(b: SessionBuilder, block, n: int) -> None:
    """Reasoning, text and calls of one model turn go in one assistant message."""
    last = b.last()
    if (
        last is not None
        and last.role == "assistant"
        and not (isinstance(block, Thinking) and any(isinstance(x, ToolCall) for x in last.blocks))
    ):
        last.blocks.append(block)
    else:
        b.add("assistant", [block], n)


IMPORTER = register(
    Importer(
        "codex",
        "Codex CLI rollout JSONL (~/.codex/sessions/**/rollout-*.jsonl): response items, exit codes, compactions",
        detect,
        read,
    )
)
