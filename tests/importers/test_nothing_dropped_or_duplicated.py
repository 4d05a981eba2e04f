"""Importer regressions from issue #13: nothing dropped, nothing duplicated, every failure visible.

Each test uses a real file from ../shared/transcripts (skipped without it) or a real-shaped sample
written here in the format's documented shape."""

from __future__ import annotations

import json
import sqlite3

from evalkit.contracts.session import Text, ToolResult
from evalkit.facts import compute_facts
from evalkit.importers import detect_format, import_paths
from evalkit.importers.building import unwrap_envelope
from evalkit.importers.inputs import UNRECOGNISED
from tests.importers.test_codex_opencode_fixtures import OPENCODE_PARTS, _check_opencode
from tests.support.cli import run_cli

CC_SMALL = "claude-code/moredip-session-share/4b2030ed-5563-49ea-b703-6a002f2d3cc8.jsonl"
AIDER_0295 = "aider/Aider-AI-aider/sessions/aider-chat-history__session0295__2024-08-09T16-51-14.md"


def _one(path):
    (s,), report = import_paths([path])
    return s, report


def test_claude_code_resumed_session_is_imported_once(transcripts, tmp_path):
    # A resumed session's file repeats the old conversation's lines (same uuids) before the new ones.
    raw = (transcripts / CC_SMALL).read_text(encoding="utf-8")
    resumed = tmp_path / "resumed.jsonl"
    resumed.write_text(raw + raw, encoding="utf-8")
    once, _ = _one(transcripts / CC_SMALL)
    twice, report = _one(resumed)
    assert [m.blocks for m in twice.messages] == [m.blocks for m in once.messages]
    records = [json.loads(ln) for ln in raw.splitlines() if ln.strip()]
    repeated = sum(1 for r in records if r.get("uuid") and r.get("type") in ("user", "assistant", "system"))
    assert report.skipped["claude-code line repeated (resumed session; same uuid)"] == repeated > 0


def test_aider_edits_replies_and_shell_runs(transcripts, tmp_path):
    s, _ = _one(transcripts / AIDER_0295)
    text = "\n".join(m.text for m in s.messages if m.role == "assistant")
    assert text.count(">>>>>>> REPLACE") == text.count("<<<<<<< SEARCH") > 0  # edit blocks closed
    edits = [c.args["path"] for m in s.messages for c in m.tool_calls() if c.name == "edit"]
    assert edits == ["tests/basic/test_commands.py"] * 2 + ["tests/basic/test_main.py"] + [
        "tests/basic/test_commands.py",
        "aider/commands.py",
    ]
    # Line 442: "(y/n/instructions) the test is failing because …" is the user's reply.
    (reply,) = [m for m in s.messages if "glob_filtered_to_repo doesn't apply" in m.text and m.role == "user"]
    assert reply.is_genuine_user()
    # A history whose first header is past line 50 is still aider's; "!cmd" is a shell call; lint
    # reports shown to the model are kept.
    raw = (transcripts / AIDER_0295).read_text(encoding="utf-8")
    lines = raw.splitlines()
    insert = lines.index(next(ln for ln in lines if ln.startswith("#### add a test")))
    lint = [
        "> # Fix any errors below, if possible.",
        ">  ",
        "> ## Running: flake8 x.py",
        "> x.py:1:1: F401 unused",
        "",
    ]
    shell = ["#### !ls tests", "> test_main.py  ", ""]
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(
        "\n".join(["old notes"] * 60 + lines[:insert] + shell + lint + lines[insert:]), encoding="utf-8"
    )
    assert detect_format(p) == "aider"
    s2, _ = _one(p)
    assert any(c.args.get("command") == "ls tests" for m in s2.messages for c in m.tool_calls())
    (lint_msg,) = [m for m in s2.messages if m.meta.get("harness") == "aider lint"]
    assert "F401 unused" in lint_msg.text and not lint_msg.is_genuine_user()


def test_unrecognised_files_are_named_and_strict_fails(transcripts, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "notes.txt").write_text("just some notes\n")
    (src / "empty.json").write_text("")
    (src / "s.jsonl").write_text((transcripts / CC_SMALL).read_text(encoding="utf-8"))
    sessions, report = import_paths([src])
    assert len(sessions) == 1
    why = {i.path.rsplit("/", 1)[-1]: i.reason for i in report.unrecognised()}
    assert why == {
        "empty.json": f"{UNRECOGNISED}: empty file",
        "notes.txt": f"{UNRECOGNISED}: format not recognised (text that no importer's detector accepts; see `evalkit importers`)",
    }

    def run(*extra):
        return run_cli("import", "auto", str(src), "--out", str(tmp_path / "c"), *extra)

    ok = run()
    assert ok.returncode == 0 and "notes.txt" in ok.stderr and "empty.json" in ok.stderr
    assert run("--strict").returncode == 1


def test_openai_json_envelope_results_are_unwrapped(tmp_path):
    out = "============ 2 failed, 8 passed in 0.4s ============"
    envelope = json.dumps({"output": out, "exit_code": 1, "error": None})
    assert unwrap_envelope(envelope) == (out, 1, None)
    assert unwrap_envelope('{"a": 1}') == ('{"a": 1}', None, None)  # not an envelope: unchanged
    msgs = [
        {"role": "user", "content": "run the tests"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "terminal", "arguments": '{"command": "pytest"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": envelope},
    ]
    p = tmp_path / "hermes.json"
    p.write_text(json.dumps(msgs))
    s, _ = _one(p)
    (res,) = [b for m in s.messages for b in m.tool_results()]
    assert (res.output, res.exit_code) == (out, 1)
    f = compute_facts(s)
    assert [(t.passed, t.failed) for t in f.tallies] == [(8, 2)]
    assert [x.exit_code for x in f.failures] == [1]


def _export(tmp_path):
    messages = [
        {
            "info": {"id": mid, **info},
            "parts": [{"id": f"prt_{k}", "messageID": mid, **p} for k, p in enumerate(parts)],
        }
        for mid, (info, parts) in OPENCODE_PARTS.items()
    ]
    p = tmp_path / "export.json"
    p.write_text(
        json.dumps({"info": {"id": "ses_1", "title": "Fix build", "version": "1.1.0"}, "messages": messages})
    )
    return p


def test_opencode_export_json_is_not_openai_chat(tmp_path):
    p = _export(tmp_path)
    assert detect_format(p) == "opencode"
    (s,), report = import_paths([p])
    _check_opencode(s, report)


def test_opencode_wal_database_is_left_untouched(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    db = live / "opencode.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.executescript(
        "CREATE TABLE session (id TEXT PRIMARY KEY, parent_id TEXT, title TEXT, version TEXT, time_created INTEGER);"
        "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data TEXT);"
        "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, data TEXT);"
    )
    con.execute("INSERT INTO session VALUES ('ses_1', NULL, 'Fix build', '1.2.0', 1)")
    for t, (mid, (info, parts)) in enumerate(OPENCODE_PARTS.items()):
        data = {k: v for k, v in info.items() if k != "sessionID"}
        con.execute("INSERT INTO message VALUES (?, 'ses_1', ?, ?)", (mid, t, json.dumps(data)))
        for k, p in enumerate(parts):
            con.execute(
                "INSERT INTO part VALUES (?, ?, 'ses_1', ?)", (f"prt_{mid}_{k:02d}", mid, json.dumps(p))
            )
    con.commit()
    # What a user's folder holds while opencode is not running: the database and its WAL, whose
    # frames are not checkpointed yet (no -shm: the last connection removed it).
    user = tmp_path / "user"
    user.mkdir()
    for name in ("opencode.db", "opencode.db-wal"):
        (user / name).write_bytes((live / name).read_bytes())
    con.close()
    before = sorted(p.name for p in user.iterdir())
    assert before == ["opencode.db", "opencode.db-wal"]
    (s,), report = import_paths([user / "opencode.db"])
    _check_opencode(s, report)  # the WAL's rows were read
    assert sorted(p.name for p in user.iterdir()) == before  # no -shm, nothing written


def test_codex_web_search_rejected_exec_and_failed_patch(tmp_path):
    lines = [
        {"type": "session_meta", "payload": {"id": "rollout-1", "cwd": "/w"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "fix it"}],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "ponyc segfault"},
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "exec_command",
                "arguments": '{"cmd": "rm -rf build"}',
                "call_id": "c1",
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "c1",
                "output": "exec command rejected by user",
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "call_id": "c2",
                "input": "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch",
            },
        },
        {
            "type": "event_msg",
            "payload": {
                "type": "patch_apply_end",
                "call_id": "c2",
                "success": False,
                "stderr": "Failed to find expected lines",
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "custom_tool_call_output",
                "call_id": "c2",
                "output": "apply_patch verification failed: Failed to find expected lines in a.py",
            },
        },
    ]
    p = tmp_path / "rollout-1.jsonl"
    p.write_text("\n".join(json.dumps({"timestamp": "2026-01-01T00:00:00Z", **ln}) for ln in lines))
    s, _ = _one(p)
    calls = [c for m in s.messages for c in m.tool_calls()]
    assert (calls[0].name, calls[0].args.get("query")) == ("web_search", "ponyc segfault")
    results = {b.call_id: b for m in s.messages for b in m.tool_results()}
    assert results["c1"].is_error and results["c2"].is_error
    f = compute_facts(s)
    assert [x.call_id for x in f.failures] == ["c1", "c2"]
    assert f.files_modified == []  # the patch did not apply


def test_swe_agent_tool_refusals_are_failures(transcripts):
    s, _ = _one(
        transcripts
        / "swe-agent/SWE-agent-repo/demo__replay__marshmallow-code__marshmallow-1867__default__t-0.20__p-0.95__c-2.00__install-1___install_from_source__marshmallow-code__marshmallow-1867.traj"
    )
    refused = [b for m in s.messages for b in m.tool_results() if b.is_error]
    assert refused and all(
        b.output.startswith("Your proposed edit has introduced new syntax error") for b in refused
    )
    f = compute_facts(s)
    assert len(f.failures) >= len(refused)
    # Edits through SWE-agent's own `edit` command land on the file its last `open` showed.
    assert any(x.path.endswith("marshmallow/fields.py") for x in f.files_modified)


def test_mini_swe_agent_trajectory(tmp_path):
    traj = {
        "info": {
            "exit_status": "Submitted",
            "submission": "",
            "mini_version": "1.9.0",
            "model_stats": {"api_calls": 3},
        },
        "messages": [
            {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
            {
                "role": "user",
                "content": "<pr_description>\nFix the parser.\n</pr_description>\nYou must not modify the tests.",
            },
            {
                "role": "assistant",
                "content": "THOUGHT: run the tests.\n\n```bash\npytest -q tests/test_parser.py\n```",
            },
            {
                "role": "user",
                "content": "<returncode>1</returncode>\n<output>\n1 failed, 4 passed in 0.10s\n</output>",
            },
            {
                "role": "assistant",
                "content": "THOUGHT: two things at once.\n\n```bash\nls\n```\n\n```bash\npwd\n```",
            },
            {
                "role": "user",
                "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.",
            },
            {
                "role": "assistant",
                "content": "THOUGHT: fix and rerun.\n\n```bash\nsed -i 's/a/b/' parser.py && pytest -q tests/test_parser.py\n```",
            },
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n5 passed in 0.09s\n</output>"},
        ],
        "trajectory_format": "mini-swe-agent-1",
    }
    p = tmp_path / "task-1.traj.json"
    p.write_text(json.dumps(traj))
    assert detect_format(p) == "mini-swe-agent"
    s, report = _one(p)
    assert not report.problems
    assert [c.args["command"] for m in s.messages for c in m.tool_calls()] == [
        "pytest -q tests/test_parser.py",
        "sed -i 's/a/b/' parser.py && pytest -q tests/test_parser.py",
    ]
    assert [b.exit_code for m in s.messages for b in m.tool_results()] == [1, 0]
    genuine = [m for m in s.messages if m.is_genuine_user()]
    assert len(genuine) == 1  # the format error is the harness talking
    assert any(isinstance(b, Text) and b.synthetic for m in s.messages for b in m.blocks if m.role == "user")
    f = compute_facts(s)
    assert [(t.passed, t.failed) for t in f.tallies] == [(4, 1), (5, 0)]
    assert [c.text for c in f.constraints] == ["You must not modify the tests."]
    assert [x.path for x in f.files_modified] == ["parser.py"]
    assert isinstance(s.messages[-1].blocks[0], ToolResult)


def test_aider_declined_edit_is_a_failing_call(transcripts):
    # session1128 line 559: "> Skipping edits to <source>python" (the user declined a new file):
    # an edit that changed nothing, a failure; the five "Applied edit to testsr.py" are not. The
    # shell commands aider offered and the user declined ("Run shell command? [Y/n] n") are
    # rejected calls; the one it ran (`chmod +x testsr.py`) is not a failure.
    s, _ = _one(
        transcripts / "aider/Aider-AI-aider/sessions/aider-chat-history__session1128__2024-08-22T06-29-25.md"
    )
    f = compute_facts(s)
    assert [(x.command, x.source) for x in f.failures] == [
        ("python testsr.py your_markdown_file.md", "rejection"),
        ("python testsr.py your_markdown_file.md", "rejection"),
        ("./testsr.py your_markdown_file.md", "rejection"),
        ("edit <source>python", "error flag"),
    ]
    assert {x.path for x in f.files_modified} == {"testsr.py"}
    assert not any(m.text.startswith("Cost: $") for m in s.messages)  # wrapped status line


def test_claude_code_task_notification_is_not_the_users_words(transcripts):
    # A background sub-agent's result arrives as a user record "<task-notification>…": its URLs,
    # agent ids and any "don't" in it are the sub-agent's output, not the user's (heldout4).
    s, _ = _one(transcripts / "claude-code/moredip-session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl")
    notes = [m for m in s.messages if m.role == "user" and "<task-notification>" in m.text]
    assert len(notes) == 3 and not any(m.is_genuine_user() for m in notes)
    urls = {i.value for i in compute_facts(s).identifiers if i.kind == "url"}
    assert urls == {"https://gist.github.com/moredip/ddfbe6ef17883b0bd33680fdf5d714af"}


def test_openhands_command_left_running_is_not_a_failure(tmp_path):
    # OpenHands' soft timeout: exit code -1, success false, "[The command has no new output after
    # 30 seconds …]" while a server keeps running (real shape: runtime_trajs__basic_gui_mode.json).
    def action(i, cmd):
        return {
            "id": i,
            "source": "agent",
            "action": "run",
            "args": {"command": cmd, "thought": ""},
            "tool_call_metadata": {"tool_call_id": f"t{i}", "function_name": "execute_bash"},
        }

    def obs(i, cause, out, code, suffix):
        return {
            "id": i,
            "source": "agent",
            "observation": "run",
            "cause": cause,
            "content": out,
            "extras": {"command": "x", "metadata": {"exit_code": code, "suffix": suffix}},
            "success": code == 0,
        }

    waiting = (
        "\n[The command has no new output after 30 seconds. You may wait longer to see additional output.]"
    )
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "serve the app"}},
        action(1, "python3 -m http.server 8000"),
        obs(2, 1, "Serving HTTP on 0.0.0.0 port 8000 ...", -1, waiting),
        action(3, "cat missing.txt"),
        obs(
            4,
            3,
            "cat: missing.txt: No such file or directory",
            1,
            "\n[The command completed with exit code 1.]",
        ),
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    s, _ = _one(path)
    results = [r for m in s.messages for r in m.tool_results()]
    assert [(r.exit_code, r.is_error) for r in results] == [(None, False), (1, True)]
    assert [f.command for f in compute_facts(s).failures] == ["cat missing.txt"]
