"""Roo Code / Kilo Code / IBM Bob task exports (Cline derivatives, Cline's Markdown shape) read by
the Cline importer: their own tools (``apply_diff``, ``update_todo_list``, …), a multi-file
``read_file``, Bob's read header with its notice, and their refusals as failing results.

The samples are real-shaped: the wording, tags and layout of IBM Bob exports committed to public
repositories (``bob_sessions/`` folders), shortened; the counts are read off the text below.
"""

from __future__ import annotations

from evalkit.contracts.session import ToolResult
from evalkit.facts import compute_facts
from evalkit.importers import import_paths

_ENV = "<environment_details>\n# VSCode Visible Files\nREADME.md\n</environment_details>\n"
_NOTICE = (
    "Reading multiple files at once is more efficient for the LLM. If other files are relevant to your "
    "current task, please read them simultaneously."
)


def _export(*turns: tuple[str, str]) -> str:
    return "\n\n---\n\n".join(f"**{role}:**\n\n{text}" for role, text in turns) + "\n"


_BOB = _export(
    ("User", f"<task>\nAdd a handler for the new tool.\n</task>\n{_ENV}"),
    (
        "Assistant",
        "Let me read the server first.\n\n<read_file>\n<args>\n  <file>\n    <path>mcp/server.py</path>\n"
        "  </file>\n</args>\n</read_file>",
    ),
    (
        "User",
        f"[read_file for 'mcp/server.py'. {_NOTICE}] Result:\n<files>\n<file><path>mcp/server.py</path>\n"
        '<content lines="1-3">\n1 | async def call_tool(name):\n2 |     if name == "a":\n3 |         return 1\n'
        f"</content>\n</file>\n</files>\n{_ENV}",
    ),
    (
        "Assistant",
        "Now the todo list.\n\n<update_todo_list>\n<todos>\n[ ] Add handler\n[ ] Run tests\n</todos>\n"
        "</update_todo_list>",
    ),
    ("User", f"[update_todo_list] Result:\nTodo list updated successfully.\n{_ENV}"),
    (
        "Assistant",
        "I'll extend call_tool.\n\n<apply_diff>\n<path>mcp/server.py</path>\n<diff>\n<<<<<<< SEARCH\n"
        ':start_line:9\n-------\nasync def call_tool(name):\n    if name == "a":\n=======\n'
        'async def call_tool(name):\n    if name == "b":\n        return await handle_b()\n'
        '    if name == "a":\n>>>>>>> REPLACE\n</diff>\n</apply_diff>',
    ),
    (
        "User",
        "[apply_diff for 'mcp/server.py'] Result:\n<error_details>\nNo sufficiently similar match found at "
        "line: 9 (24% similar, needs 100%)\n\nDebug Info:\n- Similarity Score: 24%\n</error_details>\n"
        + _ENV,
    ),
    (
        "Assistant",
        "Retrying at the right line.\n\n<apply_diff>\n<path>mcp/server.py</path>\n<diff>\n<<<<<<< SEARCH\n"
        ":start_line:1\n-------\nasync def call_tool(name):\n=======\nasync def handle_b():\n    return 2\n\n\n"
        "async def call_tool(name):\n>>>>>>> REPLACE\n</diff>\n</apply_diff>",
    ),
    (
        "User",
        "[apply_diff for 'mcp/server.py'] Result:\n<file_write_result>\n<path>mcp/server.py</path>\n"
        "<operation>modified</operation>\n<problems>\n\nNew problems detected after saving the file:\n"
        'mcp/server.py\n- [basedpyright Error] 7 | from mcp.server import Server : Import "mcp.server" could '
        "not be resolved</problems>\n<notice>\n<i>You do not need to re-read the file, as you have seen all "
        "changes</i>\n</notice>\n</file_write_result>\n\n<notice>Making multiple related changes in a single "
        f"apply_diff is more efficient.</notice>\n{_ENV}",
    ),
    (
        "Assistant",
        "Let me look at the outputs.\n\n<read_file>\n<args>\n<file>\n<path>out/summary.md</path>\n</file>\n"
        "<file>\n<path>out/log.md</path>\n</file>\n</args>\n</read_file>",
    ),
    (
        "User",
        "[read_file for 'out/summary.md', 'out/log.md'] Result:\n<files>\n<file><path>out/summary.md</path>"
        "<error>Access to out/summary.md is blocked by the .bobignore file settings. You must try to continue "
        "in the task without using this file, or ask the user to update the .bobignore file.</error></file>\n"
        "<file><path>out/log.md</path><error>File not found</error><notice>The file was not found.</notice>"
        f"</file>\n</files>\n{_ENV}",
    ),
    ("Assistant", "<execute_command>\n<command>Get-Content out/summary.md</command>\n</execute_command>"),
    (
        "User",
        "[execute_command for 'Get-Content out/summary.md'] Result:\nAccess to out/summary.md is blocked by "
        "the .bobignore file settings. You must try to continue in the task without using this file, or ask "
        f"the user to update the .bobignore file.\n{_ENV}",
    ),
)


def _import(tmp_path, text):
    p = tmp_path / "bob_task_may-3-2026_4-29-40-pm.md"
    p.write_text(text)
    (s,), report = import_paths([p])
    return s, report


def test_bob_tools_results_and_refusals_are_read(tmp_path):
    s, report = _import(tmp_path, _BOB)
    assert not report.problems, report.summary()
    calls = [c for m in s.messages for c in m.tool_calls()]
    assert [c.name for c in calls] == [
        "read_file",
        "update_todo_list",
        "apply_diff",
        "apply_diff",
        "read_file",
        "execute_command",
    ]
    assert calls[0].args["path"] == "mcp/server.py"  # from <args><file><path>
    assert [f["path"] for f in calls[4].args["files"]] == ["out/summary.md", "out/log.md"]
    assert calls[2].args["diff"].startswith("<<<<<<< SEARCH\n:start_line:9")
    results = {b.call_id: b for m in s.messages for b in m.blocks if isinstance(b, ToolResult)}
    assert len(results) == 6  # every call answered: Bob's read header with its notice included
    assert results[calls[0].id].output.startswith("<files>")
    # Failing: the diff that matched nothing, the read whose every file was refused, the ignore block.
    assert [results[c.id].is_error for c in calls] == [False, False, True, False, True, True]
    # The read header is no user text any more: the only user words are the task.
    assert [m.text for m in s.messages if m.is_genuine_user()] == ["Add a handler for the new tool."]


def test_bob_apply_diff_facts(tmp_path):
    s, _ = _import(tmp_path, _BOB)
    f = compute_facts(s)
    assert [x.path for x in f.files_modified] == ["mcp/server.py"]  # the refused diff changed nothing
    assert {x.path for x in f.files_read} == {"mcp/server.py", "out/summary.md", "out/log.md"}
    errors = [i.value for i in f.identifiers if i.kind == "error"]
    assert errors == [
        "No sufficiently similar match found at line: 9 (24% similar, needs 100%)",
        '[basedpyright Error] 7 | from mcp.server import Server : Import "mcp.server" could not be resolved',
        "Access to out/summary.md is blocked by the .bobignore file settings. You must try to continue in the "
        "task without using this file, or ask the user to update the .bobignore file.",
    ]
    # Definition lines of the REPLACE halves, none from the SEARCH halves.
    assert {i.value for i in f.identifiers if i.kind == "symbol"} == {"call_tool", "handle_b"}
    assert [(x.tool, x.source) for x in f.failures] == [
        ("apply_diff", "error flag"),
        ("apply_diff", "lint"),
        ("read_file", "error flag"),
        ("execute_command", "error flag"),
    ]


def test_a_read_with_one_file_found_is_no_failure(tmp_path):
    # The negative: a multi-file read where one file is refused and another is read succeeded.
    text = _BOB.replace(
        "<file><path>out/log.md</path><error>File not found</error><notice>The file was not found.</notice>"
        "</file>",
        '<file><path>out/log.md</path>\n<content lines="1-1">\n1 | ok\n</content>\n</file>',
    )
    s, _ = _import(tmp_path, text)
    reads = [
        b
        for m in s.messages
        for b in m.blocks
        if isinstance(b, ToolResult) and b.output.startswith("<files>")
    ]
    assert [r.is_error for r in reads] == [False, False]


def test_a_result_of_a_tool_the_importer_does_not_know_is_a_problem(tmp_path):
    # A tool name outside the importer's list stays in the assistant's text: its result cannot be
    # paired, and the report says so by name instead of dropping it silently.
    text = _export(
        ("User", f"<task>\nDraw a logo.\n</task>\n{_ENV}"),
        ("Assistant", "<paint_logo>\n<style>flat</style>\n</paint_logo>"),
        ("User", f"[paint_logo for 'flat'] Result:\nDone.\n{_ENV}"),
    )
    _, report = _import(tmp_path, text)
    assert dict(report.problems) == {"cline unknown tool": 1}


def test_a_tool_tag_cut_off_before_its_closing_tag_is_a_problem(tmp_path):
    # An export that ends inside a tool use: the call cannot be read, and the report says so.
    text = _export(
        ("User", f"<task>\nAdd a handler.\n</task>\n{_ENV}"),
        ("Assistant", "Editing now.\n\n<apply_diff>\n<path>mcp/server.py</path>\n<diff>\n<<<<<<< SEARCH\n"),
    )
    s, report = _import(tmp_path, text)
    assert dict(report.problems) == {"cline unclosed tool": 1}
    assert [c for m in s.messages for c in m.tool_calls()] == []


_TWO_TOOLS = _export(
    ("User", f"<task>\nPort the schema to Db2.\n</task>\n{_ENV}"),
    (
        "Assistant",
        "A plan first.\n\n<update_todo_list>\n<todos>\n[ ] Convert migrations\n</todos>\n</update_todo_list>\n\n"
        "<read_file>\n<args>\n  <file>\n    <path>db/V1__init.sql</path>\n  </file>\n</args>\n</read_file>",
    ),
    (
        "User",
        "[update_todo_list] Result:\nTodo list updated successfully.\n"
        "Tool [read_file] was not executed because a tool has already been used in this message. Only one "
        "tool may be used per message. You must assess the first tool's result before proceeding to use the "
        f"next tool.\n{_ENV}",
    ),
    (
        "Assistant",
        "Now the file.\n\n<read_file>\n<args>\n  <file>\n    <path>db/V1__init.sql</path>\n  </file>\n</args>\n"
        "</read_file>",
    ),
    (
        "User",
        "[read_file for 'db/V1__init.sql'] Result:\n<files>\n<file><path>db/V1__init.sql</path>\n"
        f'<content lines="1-1">\n1 | CREATE TABLE t (id INT);\n</content>\n</file>\n</files>\n{_ENV}',
    ),
)


def test_a_second_tool_refused_in_the_first_tools_result_is_its_own_failure(tmp_path):
    # Bob writes "Tool [read_file] was not executed because a tool has already been used …" into
    # the update_todo_list result: the refusal answers the read_file call, fixed by the next read.
    s, _ = _import(tmp_path, _TWO_TOOLS)
    results = [b for m in s.messages for b in m.blocks if isinstance(b, ToolResult)]
    assert [r.output.split("\n")[0][:16] for r in results] == [
        "Todo list update",
        "Tool [read_file]",
        "<files>",
    ]
    assert [r.is_error for r in results] == [False, True, False]
    f = compute_facts(s)
    assert [(x.command.split()[0], x.fixed_at is not None) for x in f.failures] == [("read_file", True)]
    assert not [i for i in f.identifiers if i.kind == "error"]  # it names only the tool: generic


def test_a_todo_result_alone_refuses_nothing(tmp_path):
    text = _TWO_TOOLS.replace(
        "Tool [read_file] was not executed because a tool has already been used in this message. Only one "
        "tool may be used per message. You must assess the first tool's result before proceeding to use the "
        "next tool.\n",
        "",
    )
    f = compute_facts(_import(tmp_path, text)[0])
    assert f.failures == []
