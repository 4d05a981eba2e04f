"""SWE-agent trajectories (``.traj``): text-parser and function-calling variants.

The ``history`` is the conversation. Function-calling runs carry OpenAI ``tool_calls`` and
``role: tool`` observations (``tool_call_ids``) and go through the shared OpenAI mapping. Text-
parser runs put the command in the assistant's ``action`` (or the trajectory step's); it becomes a
``bash`` call whose result is the next observation (the following user message, or the
trajectory step's observation when the history has none, as for the final ``submit``).
Demonstrations (``is_demo``) are synthetic text. The run's ``info.exit_status`` goes to meta.
SWE-agent records no exit codes; an observation in which its own tools refuse the action (an
edit that introduced a syntax error, a usage message, "No replacement was performed", a command
that does not exist) is flagged as an error.
"""

from __future__ import annotations

import re

from evalkit.contracts.session import Text, ToolCall
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, as_text, short_id
from evalkit.importers.inputs import ImportReport, Probe, require_json
from evalkit.importers.openai_style import OpenAIMapper

_TOOL_ERROR = re.compile(
    r"^\s*(?:Your proposed edit has introduced new syntax error|Usage: \w+|Error: |ERROR:|"
    r"No replacement was performed|Invalid `?\w+`? parameter)|^\S+: command not found\s*$",
    re.M,
)


def tool_refused(observation: str) -> bool:
    """Does a SWE-agent observation say its tool refused the action?"""
    return bool(_TOOL_ERROR.search(observation[:2000]))


def detect(probe: Probe) -> bool:
    if probe.head.lstrip()[:1] != b"{":
        return False
    if (
        b'"trajectory"' not in probe.head
        and b'"message_type"' not in probe.head
        and b'"agent"' not in probe.head
    ):
        return False
    d = probe.json
    return (
        isinstance(d, dict)
        and isinstance(d.get("history"), list)
        and ("trajectory" in d or any(isinstance(m, dict) and "agent" in m for m in d["history"][:3]))
    )


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    d = require_json(probe, report, dict)
    if d is None:
        return
    history = d.get("history")
    if not isinstance(history, list):
        report.problem(path, 0, "no history list; file skipped", key="file skipped")
        return
    info = d.get("info") if isinstance(d.get("info"), dict) else {}
    meta = {k: info[k] for k in ("exit_status", "swe_agent_version") if isinstance(info.get(k), str)}
    stats = info.get("model_stats")
    if isinstance(stats, dict):
        meta["model_stats"] = {k: v for k, v in stats.items() if isinstance(v, int | float)}
    fc = any(isinstance(m, dict) and m.get("tool_calls") for m in history)
    meta["variant"] = "function-calling" if fc else "text-parser"
    b = SessionBuilder(report, "swe-agent", path, short_id(path.name.rsplit(".", 1)[0]), meta=meta)
    traj = [s for s in d.get("trajectory") or [] if isinstance(s, dict)]
    if fc:
        mapper = OpenAIMapper(b)
        for i, m in enumerate(history):
            mapper.add(m, i + 1, f"history[{i}]", synthetic=isinstance(m, dict) and _demo(m))
    else:
        _text_parser(b, history, traj)
    s = b.finish()
    if s:
        yield s


def _demo(m: dict) -> bool:
    return str(m.get("is_demo", "")).lower() == "true"


def _text_parser(b: SessionBuilder, history: list, traj: list[dict]) -> None:
    step = 0  # index into trajectory for the next action
    open_call: str | None = None
    for i, m in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            b.report.problem(
                b.path, i + 1, f"{where}: not a system/user/assistant message; skipped", key="unknown role"
            )
            continue
        text = as_text(m.get("content"))
        role = m["role"]
        if _demo(m):
            b.text(role if role != "assistant" else "user", text, i + 1, synthetic=True)
            continue
        if role == "assistant":
            action = m.get("action")
            if not isinstance(action, str) and step < len(traj):
                action = traj[step].get("action")
            blocks = [Text(text)] if text.strip() else []
            open_call = None
            if isinstance(action, str) and action.strip():
                open_call = f"{b.session_id}:action{step}"
                blocks.append(ToolCall(open_call, "bash", {"command": action.strip()}))
            b.add("assistant", blocks, i + 1)
            step += 1
        elif role == "user" and open_call is not None:
            b.result(open_call, text, tool_refused(text), line=i + 1)
            open_call = None
        else:
            b.text(role, text, i + 1)
    if open_call is not None and step - 1 < len(traj) and isinstance(traj[step - 1].get("observation"), str):
        obs = traj[step - 1]["observation"]
        b.result(open_call, obs, tool_refused(obs))


IMPORTER = register(
    Importer(
        "swe-agent", "SWE-agent .traj trajectories (text-parser and function-calling variants)", detect, read
    )
)
