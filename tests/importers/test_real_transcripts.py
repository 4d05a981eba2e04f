"""Importers on the real transcripts in ../shared/transcripts (skipped where that folder is absent).

Expected counts were taken by hand from the raw files (opened and counted line by line, not with
the importer); each test says how.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from evalkit.contracts.session import ToolResult, tool_pairs_valid
from evalkit.facts import compute_facts
from evalkit.importers import detect_format, import_paths
from evalkit.importers.inputs import UNRECOGNISED


def _one(path):
    sessions, report = import_paths([path])
    assert len(sessions) == 1, report.summary()
    assert not report.problems, report.summary()
    return sessions[0], report


def _counts(s):
    calls = sum(len(m.tool_calls()) for m in s.messages)
    failing = sum(
        1
        for m in s.messages
        for b in m.blocks
        if isinstance(b, ToolResult) and (b.is_error or b.exit_code not in (None, 0))
    )
    return len(s.messages), calls, failing


def test_every_real_file_imports_auto_detected(transcripts):
    sessions, report = import_paths([transcripts])
    # Cline exports that end (or were interrupted) after a message with several tool uses leave
    # those calls unanswered: 15 in 7 files (counted from the raw files' last blocks and
    # "[TASK RESUMPTION]" blocks without a Result line); each gets the placeholder result. One
    # attempt_completion was cut off by "[Response interrupted by user feedback]" before its
    # closing tag (25_Review_Routes… line 9161): no call can be read from it, and the report says so.
    expected = {"call without result": 15, "cline unclosed tool": 1}
    assert dict(report.problems) == expected, report.summary()
    _, cline = import_paths([transcripts / "cline"])
    assert dict(cline.problems) == expected
    # Only the folder's README.md and manifest.json are not transcripts.
    assert report.skipped[UNRECOGNISED] == 2
    # Each file that was not imported is named, with why (issue #13).
    # (The report keeps the first 500 issues verbatim; the skipped records of the larger folder
    # now push manifest.json's past that, so each file is asked about directly too.)
    assert {Path(i.path).name for i in report.unrecognised()} <= {"README.md", "manifest.json"}
    assert all("format not recognised" in i.reason for i in report.unrecognised())
    assert detect_format(transcripts / "README.md") is None
    assert detect_format(transcripts / "manifest.json") is None
    manifest = json.loads((transcripts / "manifest.json").read_text())
    fmt = {
        "claude-code-jsonl": "claude-code",
        "swe-agent-traj": "swe-agent",
        "openhands-history-json": "openhands",
        "openai-chat-messages": "openai",
        "aider-chat-history-md": "aider",
        "inspect-eval-log-json": "inspect",
        "claude-code": "claude-code",
        "codex-rollout": "codex",
        "codex-rollout-redacted": "codex",
        "gemini-cli": "gemini-cli",
        "cline-markdown-export": "cline",
    }
    for entry in manifest:
        assert detect_format(transcripts / entry["file"]) == fmt[entry["format"]], entry["file"]
    assert report.files == len(manifest)
    assert all(tool_pairs_valid(s.messages) for s in sessions)
    assert len({s.id for s in sessions}) == len(sessions)
    assert all(len({m.id for m in s.messages}) == len(s.messages) for s in sessions)


def test_reimport_gives_the_same_ids(transcripts):
    p = transcripts / "claude-code/moredip-session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl"
    a, _ = import_paths([p])
    b, _ = import_paths([p])
    assert [m.id for m in a[0].messages] == [m.id for m in b[0].messages]


def test_claude_code_b45ad5d8(transcripts):
    # 28 lines: lines 1-4 are user lines (1 isMeta caveat, 2 /clear wrapper, 3 local-command-stdout,
    # 4 the real request); 9 distinct assistant message.ids over 17 assistant lines; 8 tool_result
    # lines; 2 system hook notices (skipped). 4 + 9 + 8 = 21 messages, 8 tool_use blocks, one
    # is_error result (line 15, Edit before Read: not a shell command, so no failing command).
    s, report = _one(
        transcripts
        / "claude-code/daaain-claude-code-log/-Users-dain-workspace-claude-code-log-sample__b45ad5d8-81fb-4bcb-baba-19d9f503d731.jsonl"
    )
    assert _counts(s) == (21, 8, 1)
    assert report.skipped["claude-code system/notice line"] == 2
    genuine = [m for m in s.messages if m.is_genuine_user()]
    assert [m.text[:30] for m in genuine] == ["Can you please help to use the"]
    f = compute_facts(s)
    # The first Edit was refused ("File has not been read yet"): a failing call that modified
    # nothing, fixed by the later Edit of the same file.
    assert (len(f.tallies), len(f.failures), len(f.constraints)) == (0, 1, 0)
    assert f.failures[0].fixed_at is not None
    assert [x.path for x in f.files_modified] == ["/Users/dain/workspace/claude-code-log/claude_code_log/utils.py"]


def test_claude_code_2b4ed4c0(transcripts):
    # Lines 1-2 queue-operation/progress (skipped); 1 user request; 10 distinct assistant
    # message.ids (yeXn4F … VDRM7X); 9 tool_result lines, 6 with is_error (lines 6, 12, 14, 17, 21,
    # 23): WebSearch and Read permission refusals and 4 Bash refusals, none re-run successfully.
    s, _ = _one(
        transcripts
        / "claude-code/daaain-claude-code-log/-src-experiments-claude_p__2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl"
    )
    assert _counts(s) == (20, 9, 6)
    f = compute_facts(s)
    assert [x.command for x in f.failures] == [
        "websearch Claude Code CLI -p flag WebSearch Task tool capabilities 2025 2026",
        'claude -p "What tools are available to you? List them all." 2>&1 | head -100',
        'claude -p "What tools are available to you? List them all." 2>&1',
        "claude --version",
        'ls -la ~/.claude/ 2>/dev/null || echo "No .claude directory"',
        "read ~/.claude/CLAUDE.md",
    ]
    assert all(x.fixed_at is None for x in f.failures)
    assert len(f.tallies) == 0


def test_claude_code_subagent_linked_to_parent(transcripts):
    # agent-a5bdbc1: 7 sidechain lines = 2 user + 3 assistant + 2 progress; the 3 assistant lines
    # share message.ids so they merge: user prompt, assistant(Task call), tool result, final text.
    p = (
        transcripts
        / "claude-code/moredip-session-share/0ccf1a04-1b4c-43b6-8aa5-79e41db43a68__subagents__agent-a5bdbc1.jsonl"
    )
    s, report = _one(p)
    assert s.meta["parent_session"] == "0ccf1a04-1b4c-43b6-8aa5-79e41db43a68"
    assert s.meta["sidechain"] is True
    assert s.id.startswith("0ccf1a04-1b4c-43b6-8aa5-79e41db43a68/agent-")
    assert len(s.messages) == 4
    assert report.skipped["claude-code progress line"] == 2


def test_swe_agent_text_parser(transcripts):
    # history: system, demo (is_demo, synthetic), task, then 5 assistant actions and 4 observations;
    # the 5th action (submit) is answered by trajectory[-1].observation (the diff). 13 messages,
    # 5 bash calls, no exit codes in this format.
    s, _ = _one(
        transcripts
        / "swe-agent/SWE-agent-repo/test__gpt4__swe-agent__test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__swe-agent__test-repo-i1.traj"
    )
    assert _counts(s) == (13, 5, 0)
    assert [c.args["command"] for m in s.messages for c in m.tool_calls()] == [
        'find_file "missing_colon.py"',
        "open tests/missing_colon.py",
        "edit 4:4\ndef division(a: float, b: float) -> float:\nend_of_edit",
        "python tests/missing_colon.py",
        "submit",
    ]
    assert s.messages[-1].blocks[0].output.startswith("\ndiff --git a/tests/missing_colon.py")
    assert s.meta["exit_status"] == "submitted" and s.meta["variant"] == "text-parser"
    assert s.messages[1].blocks[0].synthetic  # the demonstration


def test_swe_agent_function_calling(transcripts):
    # history: system, task, 4 × (assistant with one tool_call, role tool with tool_call_ids).
    s, _ = _one(
        transcripts
        / "swe-agent/SWE-agent-repo/test__gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__6e44b9__sweagenttestrepo-1c2844.traj"
    )
    assert _counts(s) == (10, 4, 0)
    assert s.meta["variant"] == "function-calling"


def test_openai_messages(transcripts):
    # JSON arrays: system, user, then (assistant with 1 tool_call, tool) pairs: 5 pairs -> 12,
    # and 4 pairs -> 10.
    d = transcripts / "openai-chat/derived-from-SWE-agent-fc-trajs"
    s, _ = _one(d / "demo__function_calling_simple.messages.json")
    assert _counts(s) == (12, 5, 0)
    s, _ = _one(
        d
        / "test__gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__6e44b9__sweagenttestrepo-1c2844.messages.json"
    )
    assert _counts(s) == (10, 4, 0)


def test_openhands_eval_record(transcripts):
    # ponyc-4593 history: system, user message, recall + its observation (skipped), 12 run, 9 read,
    # 11 edit actions each with its observation (cause), 1 error observation with no cause (a
    # malformed call: synthetic user text) and finish. 1+1+32+32+1+1 = 68 messages. Run
    # observations with non-zero exit_code: id 8 (ls src/lib, 2) and id 20 (grep, 1, no output:
    # a search that found nothing, not a failure); 11 editor results start "ERROR:".
    s, report = _one(transcripts / "openhands/OpenHands-repo/multi_swe_bench__ponylang__ponyc-4593.json")
    # Failing results: the 2 non-zero exits and the 11 editor results starting "ERROR:" (issue #13).
    assert _counts(s) == (68, 32, 13)
    f = compute_facts(s)
    assert [(x.command, x.exit_code) for x in f.failures][:1] == [("ls src/lib", 2)]
    assert [x.tool for x in f.failures].count("str_replace_editor") == 11
    assert not any(x.command.startswith("grep") for x in f.failures)
    assert report.skipped["openhands action/recall"] == 1


def test_openhands_trajectory_and_jsonl(transcripts):
    # basic_gui_mode: 18 events; user message, 2 run + 2 edit with observations, agent message;
    # 4 agent_state_changed, 1 change_agent_state, 3 null observations skipped. 1+4+4+1 = 10.
    # The second run (python3 -m http.server) ends with exit code -1 (soft timeout): the server is
    # still running, not a failed call (heldout4's label), so no failing result.
    s, _ = _one(transcripts / "openhands/OpenHands-repo/runtime_trajs__basic_gui_mode.json")
    assert _counts(s) == (10, 4, 0)
    sessions, report = import_paths([transcripts / "openhands/OpenHands-repo/resolver_mock_output.jsonl"])
    # 2 lines; line 1: message, run, run_ipython, run (+3 observations), finish -> 1+3+3+1 = 8.
    assert [len(x.messages) for x in sessions] == [8, 44]
    assert not report.problems


def test_aider_sessions(transcripts):
    # session0325: 6 "#### " inputs (request, /ex, /diff, follow-up, /test, /test); the two /test
    # runs become a synthetic bash call + result each; assistant text blocks between "> " status
    # lines. Tallies: "3 failed, 1 passed" (line 279) then "4 passed" (line 507).
    d = transcripts / "aider/Aider-AI-aider/sessions"
    s, _ = _one(d / "aider-chat-history__session0325__2024-08-09T18-45-35.md")
    f = compute_facts(s)
    assert [(t.passed, t.failed) for t in f.tallies] == [(1, 3), (4, 0)]
    assert [c.args["command"] for m in s.messages for c in m.tool_calls() if c.name == "bash"] == [
        "pytest tests/basic/test_io.py"
    ] * 2
    # "> Applied edit to aider/io.py" (lines 45, 84, 493): aider's edits, as synthetic edit calls.
    assert [c.args["path"] for m in s.messages for c in m.tool_calls() if c.name == "edit"] == ["aider/io.py"] * 3
    users = [m.text for m in s.messages if m.is_genuine_user()]
    assert users == ["make `abs_read_only_fnames` an optional param", "to `get_input` too"]
    assert s.meta["model"] == "claude-3-5-sonnet-20240620"
    # session0012: 20 inputs, two "/test pytest tests/basic/test_repomap.py" runs ("1 failed, 6
    # passed" each). Line 588's "don't use `IgnorantTemporaryDirectory` use GitTemporaryDirectory"
    # is a change to make in the code (heldout3's label), and line 131's "check only subtree files
    # appear" is the task itself: no constraints.
    s, _ = _one(d / "aider-chat-history__session0012__2024-08-06T08-47-10.md")
    f = compute_facts(s)
    assert [(t.passed, t.failed) for t in f.tallies] == [(6, 1), (6, 1)]
    assert f.constraints == []


def test_inspect_json_and_eval_zip(transcripts, tmp_path):
    # One sample: user, 4 × (assistant with a web_browser tool_call, tool), final assistant = 10.
    p = next((transcripts / "inspect-ai/UKGovernmentBEIS-inspect_ai").glob("*.json"))
    s, _ = _one(p)
    assert _counts(s) == (10, 4, 0)
    assert s.meta["model"] == "openai/gpt-4o-mini"
    # The same log as an .eval zip (the layout inspect_ai's recorder writes), plus a compaction event.
    log = json.loads(p.read_text())
    sample = log.pop("samples")[0]
    sample["events"].append(
        {"event": "compaction", "type": "summary", "tokens_before": 9000, "tokens_after": 800}
    )
    z = tmp_path / "log.eval"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("header.json", json.dumps(log))
        zf.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
    assert detect_format(z) == "inspect"
    (e,), report = import_paths([z])
    assert not report.problems
    assert report.compactions == 1
    assert [m.role for m in e.messages if m.role != "user" or not m.meta.get("synthetic")] == [
        m.role for m in s.messages
    ]
    comp = next(m for m in e.messages if m.meta.get("synthetic") and m.role == "user")
    assert (comp.blocks[0].tokens_before, comp.blocks[0].tokens_after, comp.blocks[0].trigger) == (
        9000,
        800,
        "summary",
    )
