"""Gemini CLI and Cline importers on the real files in ../shared/transcripts (skipped where that
folder is absent), plus small real-shaped files for what the real ones lack.

Expected counts were taken from the raw files (records counted in the JSON; ``**User:**``/
``**Assistant:**`` headers, tool tags and ``Result:`` lines counted with grep), not with the
importer; each test says how.
"""

from __future__ import annotations

import json

from evalkit.contracts.session import ToolResult, tool_pairs_valid
from evalkit.facts import compute_facts
from evalkit.importers import detect_format, import_paths
from evalkit.importers.cline import ENDED


def _counts(s):
    calls = sum(len(m.tool_calls()) for m in s.messages)
    failing = sum(1 for m in s.messages for b in m.blocks if isinstance(b, ToolResult) and b.is_error)
    return len(s.messages), calls, failing


def test_gemini_cli_session(transcripts):
    # 14 records: 3 "user", 11 "gemini"; 10 toolCalls, each with its functionResponse and status
    # "success": 3 + 11 + 10 = 24 messages. write_file then replace of lead_gemini.txt.
    p = transcripts / "gemini-cli/codemie-ai-codemie-code/session-2025-12-01T21-45-5b959dae.json"
    assert detect_format(p) == "gemini-cli"
    (s,), report = import_paths([p])
    assert not report.problems, report.summary()
    assert _counts(s) == (24, 10, 0)
    assert tool_pairs_valid(s.messages)
    assert [m.text for m in s.messages if m.is_genuine_user()] == [
        "hi",
        "Explain what this is",
        "Make a copy of lead_memory.txt name it as lead_gemini.txt and optimize this instructions to be "
        "shorter, consice but without loosing functionality",
    ]
    assert s.meta["model"] == "gemini-3-pro-image-preview"
    f = compute_facts(s)
    assert {x.path.rsplit("/", 1)[-1] for x in f.files_modified} == {"lead_gemini.txt"}
    assert f.failures == []


def test_gemini_cli_error_and_cancelled_calls_fail(tmp_path):
    # Real-shaped: a tool call answered with response.error, one the user cancelled, and the CLI's
    # own "info" notice (skipped, counted).
    rec = {
        "sessionId": "abc",
        "projectHash": "h",
        "startTime": "2026-01-01T00:00:00Z",
        "messages": [
            {"id": "1", "type": "user", "content": "run the tests"},
            {"id": "2", "type": "info", "content": "Request cancelled."},
            {
                "id": "3",
                "type": "gemini",
                "content": "",
                "toolCalls": [
                    {
                        "id": "c1",
                        "name": "run_shell_command",
                        "args": {"command": "pytest -q"},
                        "status": "error",
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "c1",
                                    "name": "run_shell_command",
                                    "response": {"error": "Command failed: exit code 2"},
                                }
                            }
                        ],
                    },
                    {
                        "id": "c2",
                        "name": "write_file",
                        "args": {"file_path": "a.py", "content": "x"},
                        "status": "cancelled",
                        "result": [],
                    },
                ],
            },
        ],
    }
    p = tmp_path / "session-x.json"
    p.write_text(json.dumps(rec))
    (s,), report = import_paths([p])
    assert report.skipped["gemini-cli info notice"] == 1
    assert _counts(s) == (4, 2, 2)
    f = compute_facts(s)
    assert [x.command for x in f.failures] == ["pytest -q", "write_file a.py"]
    assert f.files_modified == []  # a cancelled write changed nothing


def test_cline_task_export(transcripts):
    # 04_Improve…: 13 **User:** and 13 **Assistant:** blocks, 13 tool uses, 12 "Result:" lines;
    # the last attempt_completion has no reply (the export ends). The user's words: the <task>
    # and one <feedback>. 1 + 13 + 12 + 1 (ended) + 1 (feedback) = 28 messages.
    p = transcripts / "cline/thetom42-Python-Perplexica/04_Improve_Python_Code_and_Add_Unittests.md"
    assert detect_format(p) == "cline"
    (s,), report = import_paths([p])
    assert not report.problems, report.summary()
    assert _counts(s) == (28, 13, 0)
    users = [m.text for m in s.messages if m.is_genuine_user()]
    assert users[0].startswith("Please have a look at the files in backend/tests.")
    assert len(users) == 2
    assert all("environment_details" not in m.text for m in s.messages)
    assert s.messages[-1].blocks[0].output == ENDED
    f = compute_facts(s)
    # 8 write_to_file calls on 8 test files (lines 469-1489: 7 new files and one rewrite).
    assert len({x.path for x in f.files_modified}) == 8
    assert "backend/tests/test_youtube_search_agent.py" in {x.path for x in f.files_modified}


def test_cline_denied_call_with_feedback(transcripts):
    # 15_Fix…: 26 User and 26 Assistant blocks, 48 tool uses, 46 "Result:" lines, 4 <feedback>.
    # Line 4894: the read_file of abstract_agent.py was denied with feedback; it is a failing
    # result, and the feedback is the user's words. The last block has 2 tool uses and no reply:
    # the attempt_completion is answered as ended, the other gets the placeholder (1 problem).
    p = transcripts / "cline/thetom42-Python-Perplexica/15_Fix_Linting_Problems_in_Agents.md"
    (s,), report = import_paths([p])
    assert dict(report.problems) == {"call without result": 1}
    assert _counts(s) == (80, 48, 2)
    denied = [
        b
        for m in s.messages
        for b in m.tool_results()
        if b.output.startswith("The user denied this operation")
    ]
    assert len(denied) == 1
    users = [m.text for m in s.messages if m.is_genuine_user()]
    assert "You didn't remove whitespaces in otherwise empty lines" in users
    f = compute_facts(s)
    assert any(x.command == "read_file backend/agents/abstract_agent.py" for x in f.failures)


def test_cline_skipped_tool_and_glued_tag(tmp_path):
    # Real-shaped (from 25_… line 9178 and 02_… line 6505): a tool tag glued to the prose, a
    # multi-line <path>, and a tool skipped because the one before it was denied.
    text = (
        "**User:**\n\n<task>\nAdd a config module.\n</task>\n<environment_details>\n# VSCode Open Tabs\n"
        "</environment_details>\n\n---\n\n**Assistant:**\n\nFirst, the file:<write_to_file>\n<path>\n"
        "backend/config.py\n</path>\n<content>\ndef load():\n    return {}\n</content>\n</write_to_file>\n\n"
        "<attempt_completion>\n<result>\nDone.\n</result>\n</attempt_completion>\n\n---\n\n**User:**\n\n"
        "[write_to_file for 'backend/config.py'] Result:\nThe user denied this operation.\n"
        "Skipping tool [attempt_completion] due to user rejecting a previous tool.\n"
        "<environment_details>\n# VSCode Visible Files\n</environment_details>\n"
    )
    p = tmp_path / "task.md"
    p.write_text(text)
    (s,), report = import_paths([p])
    assert not report.problems, report.summary()
    calls = [c for m in s.messages for c in m.tool_calls()]
    assert [(c.name, c.args.get("path")) for c in calls] == [
        ("write_to_file", "backend/config.py"),
        ("attempt_completion", None),
    ]
    assert calls[0].args["content"] == "def load():\n    return {}"
    assert _counts(s) == (4, 2, 2)  # task, assistant (text + 2 calls), 2 results
    f = compute_facts(s)
    assert f.files_modified == []


def test_cline_markdown_is_not_aider(tmp_path):
    p = tmp_path / "notes.md"
    p.write_text("**User:** said hello\n\nno tags here\n")
    assert detect_format(p) is None


def test_codex_user_words_kept_only_in_event_msg(transcripts):
    # rollout 019e1695: no response_item user message at all; lines 2, 31 and 33 are
    # event_msg/user_message records, the only record of the user's three turns.
    p = (
        transcripts
        / "codex/codemie-ai-codemie-code/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
    )
    (s,), _ = import_paths([p])
    users = [m.text for m in s.messages if m.is_genuine_user()]
    assert len(users) == 3
    assert (
        users[1]
        == "there is a need for nikita to draft demo scenario around governance, budgetings, analytics\n"
    )
    # rollout 019e1625: each of its 2 typed turns is a response_item (lines 6, 22) followed by its
    # event_msg twin (lines 7, 23): read once.
    p = (
        transcripts
        / "codex/codemie-ai-codemie-code/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    )
    (s,), report = import_paths([p])
    assert [m.text for m in s.messages if m.is_genuine_user()] == [
        "show tools",
        "let's update the defailt context compart to 90 in env var",
    ]
    assert report.skipped["codex event_msg/user_message"] == 2
