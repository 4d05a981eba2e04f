"""The error classes heldout38's measurement showed (tests/fixtures/labels/README.md), each with a
positive and a negative case on a real-shaped sample: Codex rollouts (background commands polled
with ``write_stdin``, a publisher's redaction placeholders), SWE-agent's killed calls, Claude
Code's "Exit code N" results, and the user-turn constraint wordings."""

from __future__ import annotations

import json

from evalkit.contracts.session import Message, Session, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from evalkit.importers import import_paths
from tests.support.facts import ids_of, rules_of, session_of

# --------------------------------------------------------------------------- Codex rollouts


def _header(state: str, output: str = "") -> str:
    return f"Chunk ID: 5a0c8d\nWall time: 1.0041 seconds\n{state}\nOriginal token count: 0\nOutput:\n{output}"


def _rollout(tmp_path, steps: list[tuple[str, dict, str]], ends: dict[str, int]):
    """A Codex rollout (codemie-code's shape): per step a function call, its output, and at the
    end the ``exec_command_end`` events with each command's exit code, which the importer puts
    on the command's first result."""
    recs: list[dict] = [
        {"type": "session_meta", "payload": {"id": "cx2", "cwd": "/repo", "cli_version": "0.128.0"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "set the default compaction threshold"}],
            },
        },
    ]
    for n, (name, args, output) in enumerate(steps):
        cid = f"call_{n}"
        recs.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": name,
                    "arguments": json.dumps(args),
                    "call_id": cid,
                },
            }
        )
        recs.append(
            {
                "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": cid, "output": output},
            }
        )
    for cid, code in ends.items():
        recs.append(
            {"type": "event_msg", "payload": {"type": "exec_command_end", "call_id": cid, "exit_code": code}}
        )
    p = tmp_path / "rollout-2026-05-11T11-26-55-cx2.jsonl"
    p.write_text("\n".join(json.dumps({"timestamp": "2026-05-11T11:42:09Z", **r}) for r in recs) + "\n")
    (s,), _ = import_paths([p])
    return s


def _exec(cmd: str) -> tuple[str, dict]:
    return "exec_command", {"cmd": cmd, "workdir": "/repo", "yield_time_ms": 1000}


def _poll(sid: int, chars: str = "") -> tuple[str, dict]:
    return "write_stdin", {"session_id": sid, "chars": chars, "yield_time_ms": 1000}


VITEST = (
    "(node:36706) Warning: The 'NO_COLOR' env is ignored due to the 'FORCE_COLOR' env being set.\n"
    "(Use `node --trace-warnings ...` to show where the warning was created)\n"
    " FAIL  src/a.test.ts > config > sets the threshold\n"
    "AssertionError: expected undefined to deeply equal { auto: true }\n\n"
    " Test Files  1 failed (1)\n      Tests  1 failed | 15 skipped (16)\n"
)


def test_a_background_command_fails_on_the_poll_that_reports_its_exit(tmp_path):
    s = _rollout(
        tmp_path,
        [
            (*_exec("npm test -- --run src/a.test.ts"), _header("Process running with session ID 83395")),
            (*_poll(83395), _header("Process running with session ID 83395")),
            (*_poll(83395), _header("Process exited with code 1", VITEST)),
        ],
        {"call_0": 1},
    )
    f = compute_facts(s)
    # One failure per failed command, on the poll's result; the first "Process running" result
    # carries the exit code too (the importer), but the command had not ended there.
    assert [(x.message_index, x.command, x.source) for x in f.failures] == [
        (6, "npm test -- --run src/a.test.ts", "exit code")
    ]
    # The polled command's output is a command's, not a harness refusal: the exception line is
    # the error, not the Node warning it opens with.
    assert ids_of(f, "error") == {"AssertionError: expected undefined to deeply equal { auto: true }"}
    assert [(t.message_index, t.failed, t.skipped) for t in f.tallies] == [(6, 1, 15)]


def test_a_polled_search_that_found_nothing_is_not_a_failure(tmp_path):
    s = _rollout(
        tmp_path,
        [
            (
                *_exec("rg -n compaction node_modules/@codemieai"),
                _header("Process running with session ID 57575"),
            ),
            (*_exec("rg -n compact node_modules/opencode"), _header("Process running with session ID 59181")),
            (*_poll(57575), _header("Process exited with code 1")),
            (
                *_poll(59181),
                _header(
                    "Process exited with code 2",
                    "rg: node_modules/opencode: No such file or directory (os error 2)\n",
                ),
            ),
        ],
        {"call_0": 1, "call_1": 2},
    )
    f = compute_facts(s)
    # Negative: rg exit 1 with no output found nothing; positive: exit 2 on a missing path.
    assert [(x.message_index, x.command) for x in f.failures] == [(8, "rg -n compact node_modules/opencode")]
    assert ids_of(f, "error") == {"rg: node_modules/opencode: No such file or directory (os error 2)"}


def test_a_poll_refused_with_stdin_closed_is_fixed_by_the_next_poll(tmp_path):
    s = _rollout(
        tmp_path,
        [
            (*_exec("cat skills/brainstorming/SKILL.md"), _header("Process running with session ID 20936")),
            (
                *_poll(20936, "\x03"),
                "write_stdin failed: stdin is closed for this session; rerun exec_command with tty=true "
                "to keep stdin open",
            ),
            (*_poll(20936), _header("Process exited with code 0", "---\nname: brainstorming\n")),
        ],
        {"call_0": 0},
    )
    f = compute_facts(s)
    assert [(x.message_index, x.source, x.fixed_at) for x in f.failures] == [(4, "refusal", 6)]
    assert ids_of(f, "error") == set()  # the refusal holds nothing of the session
    # Negative: the same wording inside a command's output is not the harness refusing the poll.
    ok = _rollout(
        tmp_path,
        [
            (
                *_exec("grep -r 'failed:' notes.md"),
                _header("Process exited with code 0", "write_stdin failed: x\n"),
            )
        ],
        {"call_0": 0},
    )
    assert compute_facts(ok).failures == []


def test_redaction_placeholders_are_not_shas(tmp_path):
    redacted = _rollout(
        tmp_path,
        [
            (
                "exec_command",
                {"input": "[REDACTED_ARGUMENTS len=83 sha=b4e1e5f7]"},
                "[REDACTED_OUTPUT len=136 sha=b8890189]",
            )
        ],
        {},
    )
    redacted.messages.append(Message("cx2:m9", "assistant", [Text("[REDACTED_TEXT len=173 sha=86998566]")]))
    assert compute_facts(redacted).identifiers == []
    # Negative: a SHA said beside a placeholder, and one in a call's arguments, stay anchors.
    s = session_of(
        Message("s:m0", "user", [Text("[REDACTED_TEXT len=12 sha=c1f3a045] Revert 1a2b3c4 first.")]),
        Message("s:m1", "assistant", [ToolCall("c1", "bash", {"command": "git revert 5d6e7f8"})]),
    )
    assert ids_of(compute_facts(s), "sha") == {"1a2b3c4", "5d6e7f8"}


# --------------------------------------------------------------------------- other harnesses


def _swe(output: str) -> Session:
    trailer = "\n(Open file: /ctf/recover_flag.py)\n(Current directory: /ctf)\nbash-$"
    return session_of(
        Message("s:m0", "user", [Text("We're currently solving the following CTF challenge.")]),
        Message("s:m1", "assistant", [ToolCall("c1", "bash", {"command": "python recover_flag.py"})]),
        Message("s:m2", "tool", [ToolResult("c1", output + trailer)]),
    )


def test_a_call_the_harness_killed_for_time_is_a_failure_without_an_anchor():
    f = compute_facts(_swe("\nEXECUTION TIMED OUT"))
    assert [(x.message_index, x.source) for x in f.failures] == [(2, "timeout")]
    assert ids_of(f, "error") == set()  # nothing of the session in it
    later = "The command 'python recover_flag.py' was cancelled because it took more than 300 seconds."
    assert [x.source for x in compute_facts(_swe(later)).failures] == ["timeout"]
    # Negative: a program that reports a timeout it handled, with no exit code recorded.
    handled = "Connection to 10.0.0.2 timed out, retrying\nRecovered flag: flag{x}"
    assert compute_facts(_swe(handled)).failures == []


def _claude_exit(output: str) -> Session:
    return session_of(
        Message("s:m0", "user", [Text("run it on the local model")]),
        Message("s:m1", "assistant", [ToolCall("c1", "Bash", {"command": 'codemie-codex --task "5!"'})]),
        Message("s:m2", "tool", [ToolResult("c1", output, True, 1)]),
    )


def test_an_output_where_no_line_says_error_has_no_error_string():
    options = (
        "Exit code 1\n\nOptions:\n  1. Codex requires compatible models (e.g., gpt-4.1, gpt-4o)\n"
        "  2. Update profile: codemie setup\n  3. Override for this session: codemie-codex --model gpt-4.1"
    )
    f = compute_facts(_claude_exit(options))
    assert len(f.failures) == 1 and ids_of(f, "error") == set()
    # Negative: the tool's own first line, and an error line at the end of a longer output.
    assert ids_of(
        compute_facts(_claude_exit("Exit code 5\njq: parse error: Invalid numeric literal")), "error"
    ) == {"jq: parse error: Invalid numeric literal"}
    longer = "Exit code 1\nstep 1\nstep 2\nstep 3\nstep 4\nbuild failed: missing header foo.h"
    assert ids_of(compute_facts(_claude_exit(longer)), "error") == {"build failed: missing header foo.h"}


# --------------------------------------------------------------------------- constraints


def test_a_standing_clause_inside_a_request_in_question_form():
    request = (
        "Can you please read @public/tokenizer.js and do a thorough code review and while keeping it "
        "simple and dependency free (except for transformers.js) and compilation free, see TODOs and "
        "propose a plan how to refactor it?"
    )
    assert rules_of(request) == [
        "while keeping it simple and dependency free (except for transformers.js) and compilation free"
    ]
    # The same property as a sentence of its own, with a space for the hyphen.
    assert rules_of("Add the export. Keep it simple and dependency free.") == [
        "Keep it simple and dependency free."
    ]
    # Negative: a real question about the property, and a one-off change to a named thing.
    assert rules_of("Fix the tokenizer. Does it still load fast while keeping it dependency free?") == []
    assert rules_of("Add the export. Make the tokenizer a bit neater.") == []


def test_id_like_to_keep_asks_the_agent_as_an_imperative_does():
    text = (
        "Review the three files. So I'd like to keep it the same 3 simple files, but add the features "
        "from the TODOs and make the Javascript a bit neater."
    )
    assert rules_of(text) == ["So I'd like to keep it the same 3 simple files"]
    # Negative: a condition opened by "But only if" is no "only" limit of the agent's work, and a
    # wish about the code with no "keep" is the task.
    assert rules_of("Add the file to the chat. But only if it is part of the repo.") == []
    assert rules_of("Review the files. I'd like to see a dark mode in the page.") == []


def test_focus_only_on_limits_the_scope():
    assert rules_of("Fix the type errors. Focus only on the chats.py:") == ["Focus only on the chats.py:"]
    # Negative: a focus with no "only" names what to look at (the task), and "focus" as a noun.
    assert rules_of("Fix the type errors. Focus on the chats.py first.") == []
    assert rules_of("Fix the type errors. The focus only shifted after the refactor.") == []


def test_an_orchestrators_delegation_is_a_rule_on_how_the_work_is_done():
    text = (
        "OK, we're going to make a little experiment here. Now, hand over this research to teammates, have "
        "each write a work/ document summarizing the point, then, once all three documents are available, "
        "have each teammate to read the other two, and add a Comparison section in its own document. Now, "
        "the twist: have each teammate create a worktree for its own use. When their research is done they "
        "can commit."
    )
    assert rules_of(text) == [
        "Now, hand over this research to teammates",
        "Now, the twist: have each teammate create a worktree for its own use.",
    ]
    # Negative: handing something over to a person, and a permission to the teammates.
    assert rules_of("Write the report. Then hand over the keys to the client, and close the ticket.") == []
    assert rules_of("Write the report. The teammates can commit when they are done.") == []
    # A label before a colon leads in to a step only with its article ("the twist:").
    assert rules_of("Fix the parser. Bug: read fails on empty files.") == []


def test_a_chain_of_process_steps_stays_one_sentence():
    # Negative for the delegation clause cut: when the clause after the comma is a step too, the
    # whole sentence is the rule (dev37's "search for …, analyze …, so that you can figure out …").
    text = (
        "Find when the session ended. search for /clear command in ~/.claude folders - there are plenty of "
        "sessions with this command, analyze file creation date and update date and find closest files, so "
        "that you can figure out when the previous session ended"
    )
    (rule,) = rules_of(text)
    assert rule.startswith("search for /clear command") and rule.endswith("when the previous session ended")


def test_keep_in_mind_states_a_consideration_not_a_rule():
    reason = "Look into backend/config.py first. But we have to keep in mind that we want to stick to the dotenv way."
    assert rules_of(reason, reason=True) == ["Look into backend/config.py first."]
    # Negative: a prohibition after "keep in mind" still binds the agent; "we have to" alone does.
    assert rules_of("Fix it. Keep in mind that you must not push to main.") == [
        "Keep in mind that you must not push to main."
    ]
    assert rules_of("Fix it. We have to run the linter before each commit.") == [
        "We have to run the linter before each commit."
    ]


def test_a_request_for_an_overview_is_an_investigation():
    text = (
        "Give me a comprehensive overview of the code organization in the /workspace/claude-code-log "
        "project. Explore the directory structure, identify main components, and summarize the overall "
        "architecture."
    )
    assert rules_of(text) == []
    # Negative: the same step under a request that changes the code is a rule on how to work.
    change = "Refactor the CLI into modules. Explore the directory structure before you move anything."
    assert rules_of(change) == ["Explore the directory structure before you move anything."]


def test_a_later_request_in_question_form_is_read_by_the_test():
    text = (
        "Add the export. Could you please run the linter before each commit? Can you only edit main.py? "
        "Could you keep the public API unchanged?"
    )
    assert rules_of(text) == [
        "Could you please run the linter before each commit?",
        "Can you only edit main.py?",
        "Could you keep the public API unchanged?",
    ]
    # Negative: real questions, and a polite request for the deliverable.
    assert rules_of("Add the export. Does it only run on main? Should we never cache it?") == []
    assert rules_of("Add the export. Can you tell me why the build fails?") == []
