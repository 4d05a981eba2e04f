"""Codex and opencode importers on fixtures written from FORMATS.md (no permissively licensed real
samples exist), bad-input handling, redaction, the CLI, and the datasets round trip."""

from __future__ import annotations

import json
import sqlite3

from evalkit.cli import main
from evalkit.contracts.session import Compaction, ToolResult, tool_pairs_valid
from evalkit.corpus import read_sessions
from evalkit.facts import compute_facts
from evalkit.importers import detect_format, import_paths


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _ri(ts, payload):
    return {"timestamp": ts, "type": "response_item", "payload": payload}


def _ev(ts, payload):
    return {"timestamp": ts, "type": "event_msg", "payload": payload}


def _msg(role, text, kind="input_text"):
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def codex_rollout(tmp_path):
    """A rollout per FORMATS.md §2 (cli 0.118-style lines) with a failing command, a compaction and
    an interrupted turn. The user text contains a raw U+2028, which is valid inside JSON strings."""
    rows = [
        {
            "timestamp": "t0",
            "type": "session_meta",
            "payload": {
                "id": "019d6d68-aaaa",
                "cwd": "/w",
                "cli_version": "0.118.0",
                "originator": "codex-tui",
            },
        },
        {"timestamp": "t0", "type": "turn_context", "payload": {"turn_id": "1", "model": "gpt-5-codex"}},
        _ri("t1", _msg("user", "<environment_context>cwd=/w</environment_context>")),
        _ri("t1", _msg("user", "Fix the tests.\u2028Never touch vendor/.")),
        _ev("t1", {"type": "user_message", "message": "Fix the tests."}),
        _ri("t2", {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
        _ri(
            "t2",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "pytest -q"}),
                "call_id": "call_1",
            },
        ),
        _ev(
            "t3",
            {
                "type": "exec_command_end",
                "call_id": "call_1",
                "exit_code": 1,
                "status": "failed",
                "aggregated_output": "...",
            },
        ),
        _ri(
            "t3",
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": "Command: pytest -q\nProcess exited with code 1\nOutput:\nF.\n1 failed, 1 passed in 0.02s\n",
            },
        ),
        _ri(
            "t4",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "call_id": "call_2",
                "input": "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch",
            },
        ),
        _ri(
            "t4",
            {
                "type": "custom_tool_call_output",
                "call_id": "call_2",
                "output": "Success. Updated the following files:\nM src/a.py",
            },
        ),
        _ri(
            "t5",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]}),
                "call_id": "call_3",
            },
        ),
        _ri(
            "t5",
            {
                "type": "function_call_output",
                "call_id": "call_3",
                "output": json.dumps(
                    {
                        "output": "..\n2 passed in 0.01s\n",
                        "metadata": {"exit_code": 0, "duration_seconds": 0.4},
                    }
                ),
            },
        ),
        _ri("t6", _msg("assistant", "Tests pass now.", "output_text")),
        _ev("t6", {"type": "token_count", "info": {"last_token_usage": {"input_tokens": 181000}}}),
        {
            "timestamp": "t7",
            "type": "compacted",
            "payload": {
                "message": "Summary: fixed src/a.py; tests pass.",
                "replacement_history": [
                    _msg("user", "Fix the tests."),
                    _msg("assistant", "Tests pass now.", "output_text"),
                    {"type": "compaction", "encrypted_content": "gAAAB"},
                ],
            },
        },
        _ev("t7", {"type": "context_compacted"}),
        _ri("t8", _msg("user", "Now run the linter.")),
        _ri(
            "t8",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "ruff check ."}),
                "call_id": "call_4",
            },
        ),
        _ev("t9", {"type": "turn_aborted", "reason": "interrupted"}),
    ]
    return _jsonl(tmp_path / "rollout-2026-04-08T14-04-10-019d6d68.jsonl", rows)


def test_codex_rollout(tmp_path):
    p = codex_rollout(tmp_path)
    assert detect_format(p) == "codex"
    (s,), report = import_paths([p])
    assert not report.problems, report.summary()
    assert s.id == "019d6d68-aaaa" and s.meta["model"] == "gpt-5-codex"
    assert tool_pairs_valid(s.messages)
    # user env context (synthetic), user request, assistant(call_1), tool, assistant(call_2), tool,
    # assistant(call_3), tool, assistant text, compaction, user, assistant(call_4), aborted result,
    # interruption notice = 14.
    assert len(s.messages) == 14
    assert [m.text for m in s.messages if m.is_genuine_user()] == [
        "Fix the tests.\u2028Never touch vendor/.",
        "Now run the linter.",
    ]
    results = [b for m in s.messages for b in m.blocks if isinstance(b, ToolResult)]
    assert [(r.call_id, r.exit_code, r.is_error) for r in results] == [
        ("call_1", 1, True),
        ("call_2", None, False),
        ("call_3", 0, False),
        ("call_4", None, True),
    ]
    comp = [b for m in s.messages for b in m.blocks if isinstance(b, Compaction)]
    assert comp == [Compaction("Summary: fixed src/a.py; tests pass.", 181000, None, "unknown")]
    kept = next(m for m in s.messages if m.blocks and isinstance(m.blocks[0], Compaction)).meta[
        "replacement_history"
    ]
    assert kept == [
        {"role": "user", "text": "Fix the tests."},
        {"role": "assistant", "text": "Tests pass now."},
    ]
    assert s.messages[-1].meta == {"interrupted": True} and s.messages[-1].blocks[0].synthetic
    f = compute_facts(s)
    # The aborted call counts as failed, as Claude Code's "[Request interrupted …]" error results do.
    assert [(x.command, x.exit_code, x.fixed_at) for x in f.failures] == [
        ("pytest -q", 1, 7),
        ("ruff check .", None, None),
    ]
    assert [(t.passed, t.failed) for t in f.tallies] == [(1, 1), (2, 0)]
    assert [x.path for x in f.files_modified] == ["src/a.py"]
    assert len(f.compactions) == 1
    assert report.skipped["codex encrypted reasoning"] == 1


OPENCODE_PARTS = {
    # message id -> (message info, [parts]); a compaction, a failing bash (exit 2), a tool error, and
    # a tool part left running (session killed mid-call).
    "msg_01": (
        {"role": "user", "sessionID": "ses_1", "time": {"created": 1}},
        [{"type": "text", "text": "Fix build. Don't edit generated files."}],
    ),
    "msg_02": (
        {
            "role": "assistant",
            "sessionID": "ses_1",
            "parentID": "msg_01",
            "modelID": "kimi-k2.6",
            "tokens": {"input": 7075, "output": 151},
        },
        [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Look at the build first."},
            {
                "type": "tool",
                "tool": "bash",
                "callID": "functions.bash:0",
                "state": {
                    "status": "completed",
                    "input": {"command": "make"},
                    "output": "make: *** [all] Error 2\n",
                    "metadata": {"exit": 2},
                },
            },
            {"type": "step-finish", "reason": "tool-calls"},
            {"type": "step-start"},
            {
                "type": "tool",
                "tool": "read",
                "callID": "functions.read:1",
                "state": {
                    "status": "error",
                    "input": {"filePath": "gen/x.c"},
                    "error": "File not found: gen/x.c",
                },
            },
            {"type": "step-finish", "reason": "tool-calls"},
            {"type": "step-start"},
            {"type": "text", "text": "The build fails in gen/."},
            {"type": "step-finish", "reason": "stop"},
        ],
    ),
    "msg_03": ({"role": "user", "sessionID": "ses_1"}, [{"type": "compaction", "auto": True}]),
    "msg_04": (
        {
            "role": "assistant",
            "sessionID": "ses_1",
            "summary": True,
            "mode": "compaction",
            "tokens": {"input": 150000, "output": 900},
        },
        [{"type": "text", "text": "Summary: make fails with Error 2 in gen/."}],
    ),
    "msg_05": ({"role": "user", "sessionID": "ses_1"}, [{"type": "text", "text": "Try again."}]),
    "msg_06": (
        {"role": "assistant", "sessionID": "ses_1", "error": {"name": "MessageAbortedError"}},
        [
            {"type": "step-start"},
            {
                "type": "tool",
                "tool": "bash",
                "callID": "functions.bash:2",
                "state": {"status": "running", "input": {"command": "make -j8"}},
            },
        ],
    ),
}


def _check_opencode(s, report):
    assert not report.problems, report.summary()
    assert s.id == "ses_1" and s.meta["title"] == "Fix build"
    assert tool_pairs_valid(s.messages)
    # user, asst(make), tool, asst(read), tool, asst(text), compaction, user, asst(make -j8), tool = 10
    assert [m.role for m in s.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "user",
        "assistant",
        "tool",
    ]
    results = [b for m in s.messages for b in m.blocks if isinstance(b, ToolResult)]
    assert [(r.exit_code, r.is_error) for r in results] == [(2, False), (None, True), (None, True)]
    assert results[2].output.startswith("[interrupted")
    (comp,) = [b for m in s.messages for b in m.blocks if isinstance(b, Compaction)]
    assert comp == Compaction("Summary: make fails with Error 2 in gen/.", 150000, 900, "auto")
    f = compute_facts(s)
    # The read the harness flagged is_error is a failing call too (issue #13: failures of any kind);
    # the call the session was killed in has no recorded result, so it is no failure (labels README).
    assert [(x.command, x.exit_code) for x in f.failures] == [("make", 2), ("read gen/x.c", None)]
    assert [c.keyword for c in f.constraints] == ["don't"]
    assert report.skipped["opencode tool part left running (interrupted)"] == 1


def test_opencode_storage_tree(tmp_path):
    root = tmp_path / "storage"
    (root / "session" / "global").mkdir(parents=True)
    (root / "session" / "global" / "ses_1.json").write_text(
        json.dumps({"id": "ses_1", "title": "Fix build", "version": "1.1.0"})
    )
    for mid, (info, parts) in OPENCODE_PARTS.items():
        (root / "message" / "ses_1").mkdir(parents=True, exist_ok=True)
        (root / "message" / "ses_1" / f"{mid}.json").write_text(json.dumps({"id": mid, **info}))
        (root / "part" / mid).mkdir(parents=True)
        for k, p in enumerate(parts):
            (root / "part" / mid / f"prt_{mid}_{k:02d}.json").write_text(
                json.dumps({"id": f"prt_{k}", "messageID": mid, **p})
            )
    assert detect_format(tmp_path) == "opencode"
    (s,), report = import_paths([tmp_path])
    _check_opencode(s, report)


def test_opencode_sqlite(tmp_path):
    # Schema per FORMATS.md §3: session columns; message/part rows with the JSON in `data`
    # (the old file JSON minus id and foreign keys).
    db = tmp_path / "opencode.db"
    con = sqlite3.connect(db)
    con.executescript(
        """
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT, directory TEXT,
                              title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
        """
    )
    con.execute(
        "INSERT INTO session VALUES ('ses_1', 'global', NULL, 'fix', '/w', 'Fix build', '1.2.0', 1, 2)"
    )
    for t, (mid, (info, parts)) in enumerate(OPENCODE_PARTS.items()):
        data = {k: v for k, v in info.items() if k != "sessionID"}
        con.execute("INSERT INTO message VALUES (?, 'ses_1', ?, ?, ?)", (mid, t, t, json.dumps(data)))
        for k, p in enumerate(parts):
            con.execute(
                "INSERT INTO part VALUES (?, ?, 'ses_1', ?, ?, ?)",
                (f"prt_{mid}_{k:02d}", mid, t, t, json.dumps(p)),
            )
    con.commit()
    con.close()
    assert detect_format(db) == "opencode"
    (s,), report = import_paths([db])
    _check_opencode(s, report)


def test_bad_input_is_counted_with_file_and_line(tmp_path):
    p = tmp_path / "s.jsonl"
    good_user = {
        "type": "user",
        "sessionId": "S",
        "uuid": "u1",
        "message": {"role": "user", "content": "Always run tests."},
    }
    call = {
        "type": "assistant",
        "sessionId": "S",
        "uuid": "a1",
        "message": {
            "id": "m1",
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}},
            ],
        },
    }
    result = {
        "type": "user",
        "sessionId": "S",
        "message": {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "is_error": True,
                    "content": "Exit code 1\n1 failed in 0.1s",
                }
            ],
        },
    }
    orphan = {
        "type": "user",
        "sessionId": "S",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}],
        },
    }
    lines = [
        json.dumps(good_user).encode(),  # 1 ok
        b'{"type": "user", "message": ',  # 2 malformed
        json.dumps({"type": "mystery", "sessionId": "S", "uuid": "x"}).encode(),  # 3 unknown type
        json.dumps(call).encode(),  # 4 ok; t2 never answered
        json.dumps(result).encode(),  # 5 ok
        json.dumps(orphan).encode(),  # 6 result without call
        json.dumps({"type": "user", "sessionId": "S", "message": {"role": "user", "content": "caf\u00e9 ok"}})
        .encode()
        .replace(b"ok", b"\xff\xfe"),  # 7 non-UTF-8
        json.dumps(
            {"type": "user", "sessionId": "S", "message": {"role": "user", "content": "line\u2028sep"}},
            ensure_ascii=False,
        ).encode(),  # 8 raw U+2028
        b"[1, 2]",  # 9 not an object
        json.dumps(good_user).encode()[:-9],  # 10 truncated (last line)
    ]
    p.write_bytes(b"\n".join(lines))
    (s,), report = import_paths([p])
    where = {(i.line, i.reason.split(";")[0].split(":")[0]) for i in report.issues if i.kind == "problem"}
    assert where == {
        (2, "truncated JSON line"),
        (3, "unknown entry type 'mystery'"),
        (4, "tool call t2 has no result"),
        (6, "result for unknown call nope"),
        (7, "non-UTF-8 bytes at byte 85"),
        (9, "expected a JSON object, got list"),
        (10, "truncated JSON line"),
    }
    assert sum(report.problems.values()) == 7
    assert tool_pairs_valid(s.messages)
    texts = [m.text for m in s.messages if m.role == "user"]
    assert texts == ["Always run tests.", "caf\u00e9 \ufffd\ufffd", "line\u2028sep"]
    assert all(str(i).startswith(str(p)) for i in report.issues)


def test_unparseable_whole_file_is_one_counted_problem(tmp_path):
    p = tmp_path / "x.traj"
    p.write_text('{"trajectory": [], "history": [{"role": "user", "agent": "main", "content": "hi"')
    sessions, report = import_paths([p], fmt="swe-agent")
    assert sessions == []
    assert [str(i) for i in report.issues] == [
        f"{p}: file skipped: truncated JSON: Expecting ',' delimiter at line 1"
    ]


def test_openai_legacy_function_call_and_jsonl(tmp_path):
    p = _jsonl(
        tmp_path / "chat.jsonl",
        [
            {"role": "user", "content": "What's in a.txt?"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
            },
            {"role": "function", "name": "read_file", "content": "hello"},
            {"role": "assistant", "content": [{"type": "text", "text": "It says hello."}]},
            {"role": "wizard", "content": "?"},
        ],
    )
    assert detect_format(p) == "openai"
    (s,), report = import_paths([p])
    assert [m.role for m in s.messages] == ["user", "assistant", "tool", "assistant"]
    assert s.messages[1].tool_calls()[0].args == {"path": "a.txt"}
    assert s.messages[2].tool_results()[0].call_id == s.messages[1].tool_calls()[0].id
    assert report.problems == {"unknown role": 1}


def test_redact_counts_replacements(tmp_path):
    key = "sk-proj-" + "a1B2" * 8
    p = _jsonl(tmp_path / "c.json", [])
    p.write_text(
        json.dumps(
            [
                {"role": "user", "content": f"use OPENAI_API_KEY={key}"},
                {
                    "role": "assistant",
                    "content": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----",
                },
            ]
        )
    )
    (s,), report = import_paths([p], redact=True)
    assert key not in json.dumps([m.text for m in s.messages])
    assert s.messages[0].text == "use OPENAI_API_KEY=[REDACTED:openai_key]"
    assert report.redactions == {"openai_key": 1, "private_key": 1}


def test_cli_import_writes_corpus_and_summary(tmp_path, capsys):
    src = codex_rollout(tmp_path)
    out = tmp_path / "corpus"
    assert main(["import", "auto", str(src), "--out", str(out), "--redact"]) == 0
    printed = capsys.readouterr().out
    assert "imported 1 sessions from 1 inputs (codex: 1)" in printed
    assert "messages 14, tool calls 4, failing results 2, recorded compactions 1" in printed
    (s,) = list(read_sessions(out))
    assert s.source.format == "codex"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stats"]["failing_commands"] == 2
    assert manifest["redacted"] is True and manifest["import"]["sessions"] == 1
    facts = [json.loads(line) for line in (out / "facts.jsonl").read_text().splitlines()]
    assert len(facts[0]["compactions"]) == 1
    assert main(["import", "nope", str(src), "--out", str(out)]) == 2


def test_dataset_round_trip_and_hf_importer(tmp_path):
    from evalkit.corpus.dataset import export_parquet, import_parquet, to_dataset

    (s,), _ = import_paths([codex_rollout(tmp_path)])
    out = tmp_path / "c"
    from evalkit.corpus import write_corpus

    write_corpus([s], out)
    assert export_parquet(out, tmp_path / "c.parquet") == 1
    (back,) = list(import_parquet(tmp_path / "c.parquet"))
    assert back == s
    assert to_dataset([s])[0]["n_messages"] == 14
    # hf importer: a saved dataset whose rows hold OpenAI messages under a custom column name.
    import datasets

    ds = datasets.Dataset.from_list(
        [
            {
                "sid": "a",
                "conv": json.dumps(
                    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
                ),
            },
            {"sid": "b", "conv": "not json"},
        ]
    )
    ds.save_to_disk(str(tmp_path / "ds"))
    assert detect_format(tmp_path / "ds") == "hf"
    sessions, report = import_paths(
        [tmp_path / "ds"], options={"messages_column": "conv", "id_column": "sid"}
    )
    assert [(x.id, len(x.messages)) for x in sessions] == [("a", 2)]
    assert report.problems == {"malformed messages": 1}
