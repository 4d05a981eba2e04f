"""Cline task exports (Markdown, "Export task" in the Cline VS Code extension).

The file alternates ``**User:**`` and ``**Assistant:**`` blocks separated by ``---`` lines.

- An assistant block holds ``<thinking>`` (thinking), free text, and tool uses written as XML
  (``<write_to_file><path>…</path><content>…</content></write_to_file>``): each becomes a
  :class:`ToolCall` named by its tag, with its parameters as arguments.
- A user block answers them: ``[read_file for 'x'] Result:`` (older exports: ``[tool Result]``)
  opens each tool's result, in call order. "The user denied this operation", ``[ERROR]`` and an
  interrupted call are failing results; a tool Cline skipped because an earlier one was denied
  is answered by that notice, as a failing result.
- The user's own words are the first block's ``<task>``, each ``<feedback>`` (typed when
  rejecting a call or answering a completion; kept in the result too, where the model saw it)
  and ``<user_message>`` after a task resumption. Cline's injected text (``<environment_details>``
  is dropped; ``[TASK RESUMPTION]`` notices, ``[ERROR] You did not use a tool…`` and
  ``<workspace_diagnostics>``) is kept as synthetic user text.

Roo Code, Kilo Code and IBM Bob (Cline derivatives) export the same shape with tools of their
own: ``apply_diff`` (a SEARCH/REPLACE ``diff``), ``insert_content``, ``search_and_replace``,
``codebase_search``, ``update_todo_list``, ``switch_mode``, ``fetch_instructions`` and others; a
multi-file ``read_file`` carries ``<args><file><path>…</path></file>…</args>``, and a result header
may carry a notice after the target (``[read_file for 'x'. Reading multiple files at once is more
efficient …] Result:``). Their refusals are failing results too: ``<error_details>`` (a diff that
did not match), an ignore file's block ("Access to x is blocked by the .bobignore file
settings …") and a read whose every file is answered ``<error>``.

Cline writes no exit codes (``execute_command`` output is text) and no compaction records; Bob
writes ``Exit code: N`` into a failed command's output.
"""

from __future__ import annotations

import re

from evalkit.contracts.session import Text, Thinking, ToolCall
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, short_id
from evalkit.importers.inputs import ImportReport, Probe, decode_reported

ROLE = re.compile(r"^\*\*(User|Assistant):\*\*\s*$")
TOOLS = (
    # Cline
    "execute_command",
    "read_file",
    "write_to_file",
    "replace_in_file",
    "search_files",
    "list_files",
    "list_code_definition_names",
    "browser_action",
    "use_mcp_tool",
    "access_mcp_resource",
    "load_mcp_documentation",
    "web_fetch",
    "ask_followup_question",
    "attempt_completion",
    "new_task",
    "plan_mode_respond",
    "condense",
    "new_rule",
    "report_bug",
    # Roo Code, Kilo Code and IBM Bob
    "apply_diff",
    "insert_content",
    "search_and_replace",
    "search_replace",
    "codebase_search",
    "update_todo_list",
    "switch_mode",
    "fetch_instructions",
    "run_slash_command",
    "generate_image",
)
# The tag ends its line; it usually starts one too, but older exports glue it to the prose.
_TOOL_OPEN = re.compile(rf"<({'|'.join(TOOLS)})>[ \t]*$", re.M)
_PARAM = re.compile(r"<(\w+)>")
# Parameters whose value is free text that may itself hold tags: read to the last closing tag.
_LONG_PARAMS = {"content", "diff", "result", "arguments", "search", "replace", "todos", "message"}
# "[read_file for 'x'] Result:", "[search_files for 're' in '*.py'] Result:", "[switch_mode to 'code'
# because: …] Result:", Bob's "[read_file for 'x'. Reading multiple files at once …] Result:", and
# older exports' "[tool Result]".
_RESULT = re.compile(r"^\[(\w+)(?: (?:for|to|in) [^\n]*?)?(?:\] Result:?| Result\])\s*$", re.M)
_ENV = re.compile(r"<environment_details>.*?(?:</environment_details>|\Z)", re.S)
_DIAGNOSTICS = re.compile(r"<workspace_diagnostics>.*?(?:</workspace_diagnostics>|\Z)", re.S)
_OWN = re.compile(r"<(task|feedback|user_message|answer)>\n?(.*?)\n?</\1>", re.S)
_FAILED = re.compile(
    r"^\s*(?:The user denied this operation|\[ERROR\]|Task was interrupted before this tool call|"
    r"The tool execution failed|Error (?:executing|reading|writing)|<error_details>|"
    # An ignore file's refusal (.clineignore, .rooignore, .bobignore, .kilocodeignore).
    r"Access to .{1,500}? is blocked by the \.\w+ file settings)",
    re.I,
)
# A multi-file read's answer: a <file> entry per path, each with its <content> or its <error>.
_FILE_ENTRY = re.compile(r"<file>(.*?)</file>", re.S)
_DENIED = re.compile(r"^\s*The user denied this operation")
ENDED = "[the export ends here: no reply to this completion]"
_SKIPPED = re.compile(r"^Skipping tool \[(\w+)[^\]]*\] due to user rejecting a previous tool\.?\s*$", re.M)
# Roo's and Bob's refusal of a second tool in one message, written into the first tool's result:
# the refused call's own (failing) result.
_NOT_EXECUTED = re.compile(
    r"^Tool \[(\w+)[^\]]*\] was not executed because a tool has already been used in this message\.[^\n]*$",
    re.M,
)


def detect(probe: Probe) -> bool:
    head = probe.head_text.lstrip("\ufeff")
    return bool(ROLE.match(head.split("\n", 1)[0])) and (
        "<environment_details>" in head or "<task>" in head or "] Result:" in head
    )


def _blocks(path, report: ImportReport):
    """(role, first line number, text) of each User/Assistant block."""
    role, start, lines = None, 0, []
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            line = decode_reported(raw, path, n, report).rstrip("\r\n")
            m = ROLE.match(line)
            if m:
                if role:
                    yield role, start, "\n".join(lines)
                role, start, lines = m.group(1).lower(), n, []
                continue
            lines.append(line)
    if role:
        yield role, start, "\n".join(lines)


def _strip_separator(text: str) -> str:
    return re.sub(r"\n-{3,}\s*\Z", "", text.rstrip()).strip()


def _tool_args(body: str) -> dict:
    """The parameters of one tool use: ``<name>value</name>`` pairs in order."""
    args, pos = {}, 0
    while True:
        m = _PARAM.search(body, pos)
        if not m:
            return args
        name = m.group(1)
        close = f"</{name}>"
        end = body.rfind(close) if name in _LONG_PARAMS else body.find(close, m.end())
        if end < 0:
            return args
        value = body[m.end() : end]
        # Short parameters are single values however they are wrapped ("<path>\nx.py\n</path>");
        # free text keeps its inner lines, without the newlines that frame it.
        value = value.strip("\n") if name in _LONG_PARAMS else value.strip()
        args[name] = value
        pos = end + len(close)


def _file_args(args: dict) -> dict:
    """Roo's and Bob's ``<args><file><path>…</path>…</file>…</args>``: each file's parameters in
    ``files``, and the first file's path (and diff) as the call's own, as a one-file call has them."""
    files = [_tool_args(m.group(1)) for m in _FILE_ENTRY.finditer(args.get("args", ""))]
    files = [f for f in files if f.get("path")]
    if not files:
        return args
    out = {k: v for k, v in args.items() if k != "args"}
    out["files"] = files
    out.setdefault("path", files[0]["path"])
    # A multi-file apply_diff's diff per file sits in <diff><content>…</content></diff>.
    diffs = [_tool_args(f["diff"]).get("content", f["diff"]) for f in files if f.get("diff")]
    if diffs and "diff" not in out:
        out["diff"] = "\n".join(diffs)
    return out


def _failed(output: str) -> bool:
    """Whether Cline or its derivatives answered the call with a failure: a refusal or error
    notice (``_FAILED``), or a multi-file read whose every file is answered ``<error>``."""
    if _FAILED.match(output):
        return True
    if not output.startswith("<files>"):
        return False
    entries = _FILE_ENTRY.findall(output)
    return bool(entries) and all("<error>" in e and "<content" not in e for e in entries)


def _assistant(text: str, sid: str, counter: list[int], unclosed: list[str]) -> tuple[list, list[ToolCall]]:
    """The assistant block's prose, thinking and tool calls; ``unclosed`` collects the names of
    tool tags with no closing tag (kept as prose: the import report counts them)."""
    blocks: list = []
    calls: list[ToolCall] = []
    pos = 0
    for m in _TOOL_OPEN.finditer(text):
        if m.start() < pos:
            continue  # a tag inside an earlier tool's parameters
        name = m.group(1)
        end = text.find(f"</{name}>", m.end())
        # Free-text parameters may quote the tool's own closing tag: take the last one before
        # the next tool use.
        nxt = _TOOL_OPEN.search(text, m.end())
        limit = nxt.start() if nxt else len(text)
        last = text.rfind(f"</{name}>", m.end(), limit)
        end = last if last >= 0 else end
        if end < 0:
            unclosed.append(name)
            continue
        blocks.extend(_prose(text[pos : m.start()]))
        counter[0] += 1
        args = _tool_args(text[m.end() : end])
        call = ToolCall(f"{sid}:c{counter[0]}", name, _file_args(args) if "args" in args else args)
        blocks.append(call)
        calls.append(call)
        pos = end + len(name) + 3
    blocks.extend(_prose(text[pos:]))
    return blocks, calls


def _prose(text: str) -> list:
    out: list = []
    for part in re.split(r"(<thinking>.*?</thinking>)", text, flags=re.S):
        if part.startswith("<thinking>"):
            inner = part[len("<thinking>") : -len("</thinking>")].strip()
            if inner:
                out.append(Thinking(inner))
        elif part.strip():
            out.append(Text(part.strip()))
    return out


def _user_texts(b: SessionBuilder, text: str, line: int) -> None:
    """The user's own words (task, feedback, typed message) and Cline's injected text."""
    text = _ENV.sub("", text)
    diags = _DIAGNOSTICS.findall(text)
    text = _DIAGNOSTICS.sub("", text)
    own = list(_OWN.finditer(text))
    rest = _OWN.sub("", text).strip()
    if rest:
        b.text("user", rest, line, synthetic=True, meta={"harness": "cline"})
    for m in own:
        b.text("user", m.group(2).strip(), line)
    for d in diags:
        b.text("user", d, line, synthetic=True, meta={"harness": "cline diagnostics"})


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    sid = short_id(path.stem)
    b = SessionBuilder(report, "cline", path, sid)
    counter = [0]
    open_calls: list[ToolCall] = []
    for role, line, raw in _blocks(path, report):
        text = _strip_separator(raw)
        if role == "assistant":
            unclosed: list[str] = []
            blocks, calls = _assistant(text, sid, counter, unclosed)
            for name in unclosed:
                report.problem(
                    path, line, f"{name} tag with no closing tag; kept as text", key="cline unclosed tool"
                )
            b.add("assistant", blocks, line)
            open_calls = calls
            continue
        heads = list(_RESULT.finditer(text))
        _user_texts(b, text[: heads[0].start()] if heads else text, line)
        for k, h in enumerate(heads):
            body = text[h.end() : heads[k + 1].start() if k + 1 < len(heads) else len(text)]
            name = h.group(1)
            call = next((c for c in open_calls if c.name == name), None)
            if call is None:
                # An export that continues an earlier task opens with that task's last result.
                if name not in TOOLS:
                    # A tool this importer does not know: its call stayed in the assistant's text.
                    report.problem(
                        path, line, f"result of unknown tool {name}; dropped", key="cline unknown tool"
                    )
                elif counter[0]:
                    report.problem(
                        path,
                        line,
                        f"result of {name} with no open {name} call; dropped",
                        key="cline result without call",
                    )
                else:
                    report.skip(
                        path, line, f"result of {name} from before the export", key="cline earlier result"
                    )
                for m in _OWN.finditer(_ENV.sub("", body)):
                    b.text("user", m.group(2).strip(), line, meta={"cline": "feedback"})
                continue
            open_calls.remove(call)
            skipped = [(m.group(1), None) for m in _SKIPPED.finditer(body)]
            skipped += [(m.group(1), m.group(0).strip()) for m in _NOT_EXECUTED.finditer(body)]
            body = _NOT_EXECUTED.sub("", _SKIPPED.sub("", body))
            output = _DIAGNOSTICS.sub("", _ENV.sub("", body)).strip()
            b.result(call.id, output, is_error=_failed(output), line=line)
            # Feedback typed when denying the call is the reason for the rejection.
            meta = {"cline": "feedback", **({"rejection": True} if _DENIED.match(output) else {})}
            for m in _OWN.finditer(output):
                b.text("user", m.group(2).strip(), line, meta=meta)
            for skipped_name, refusal in skipped:
                nxt = next((c for c in open_calls if c.name == skipped_name), None)
                if nxt is not None:
                    open_calls.remove(nxt)
                    b.result(
                        nxt.id,
                        refusal or f"Skipping tool [{skipped_name}] due to user rejecting a previous tool.",
                        is_error=True,
                        line=line,
                    )
    for call in open_calls:
        if call.name == "attempt_completion":
            # The task ended on the agent's completion with no reply: nothing failed.
            b.result(call.id, ENDED, line=0)
    s = b.finish()
    if s:
        yield s


register(
    Importer(
        "cline",
        "Cline task export Markdown (**User:**/**Assistant:** blocks, XML tool uses, [tool] Result: answers)",
        detect,
        read,
    )
)
