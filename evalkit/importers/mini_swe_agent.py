"""mini-swe-agent trajectories (``*.traj.json``, ``"trajectory_format": "mini-swe-agent-1"``).

The file is ``{"info": {exit_status, submission, model_stats, mini_version, config}, "messages":
[…], "trajectory_format": …}``. mini-swe-agent has no tool-call API: the model writes exactly one
```` ```bash ```` block per turn and the harness answers as a *user* message, by default
``<returncode>N</returncode>\\n<output>…</output>`` (or ``<warning>`` / timeout text). So an
assistant turn with one bash block becomes that text plus a ``bash`` call, and the harness's
answer becomes its result with the return code as exit code. Harness feedback that answers no
action (a format error: zero or several blocks) is synthetic user text. The first user message
(the task) is genuine.
"""

from __future__ import annotations

import re

from evalkit.contracts.session import Text, ToolCall
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, as_text, short_id
from evalkit.importers.inputs import ImportReport, Probe, require_json

_ACTION = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)\n```", re.S)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.S)
# Harness answers to an action that are not a normal completion (timeouts, long outputs).
_OBSERVATION = re.compile(r"^\s*(?:<returncode>|<output>|<warning>|The last command .* timed out)", re.S)


def detect(probe: Probe) -> bool:
    if probe.head.lstrip()[:1] != b"{" or b'"messages"' not in probe.head:
        return False
    if b"mini-swe-agent" not in probe.head and b"mini_version" not in probe.head:
        return False
    d = probe.json
    if not isinstance(d, dict) or not isinstance(d.get("messages"), list):
        return False
    fmt = str(d.get("trajectory_format", ""))
    info = d.get("info") if isinstance(d.get("info"), dict) else {}
    return fmt.startswith("mini-swe-agent") or "mini_version" in info


def _observation_text(content: str) -> tuple[str, int | None]:
    code = _RETURNCODE.search(content)
    out = _OUTPUT.search(content)
    text = out.group(1) if out else content
    return text, int(code.group(1)) if code else None


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    d = require_json(probe, report, dict)
    if d is None:
        return
    info = d.get("info") if isinstance(d.get("info"), dict) else {}
    meta = {k: info[k] for k in ("exit_status", "mini_version") if isinstance(info.get(k), str)}
    stem = path.name.split(".traj")[0] if ".traj" in path.name else path.stem
    b = SessionBuilder(report, "mini-swe-agent", path, short_id(stem), meta=meta)
    open_call: str | None = None
    seen_task = False
    for k, m in enumerate(d["messages"]):
        where = f"messages[{k}]"
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            report.problem(
                path, 0, f"{where}: not a message with a known role; skipped", key="malformed message"
            )
            continue
        role, content = m["role"], as_text(m.get("content"))
        if role == "system":
            b.text("system", content, 0)
        elif role == "assistant":
            actions = _ACTION.findall(content)
            blocks: list = [Text(content)] if content.strip() else []
            if len(actions) == 1:
                open_call = f"{b.session_id}:action{k}"
                blocks.append(ToolCall(open_call, "bash", {"command": actions[0]}))
            else:
                open_call = None  # the harness answers with a format error, not a result
            b.add("assistant", blocks, 0)
        elif open_call is not None and _OBSERVATION.match(content):
            text, code = _observation_text(content)
            b.result(open_call, text, exit_code=code)
            open_call = None
        else:
            # The task is the user's; every later user-role message is the harness talking.
            b.text("user", content, 0, synthetic=seen_task)
            seen_task = True
    s = b.finish()
    if s:
        yield s


IMPORTER = register(
    Importer(
        "mini-swe-agent",
        "mini-swe-agent trajectories (*.traj.json): bash blocks as calls, <returncode> answers as results",
        detect,
        read,
    )
)
