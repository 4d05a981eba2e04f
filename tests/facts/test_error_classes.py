"""The error classes of issue #37, each with a positive and a negative case on a real-shaped sample
(the shapes of Claude Code JSONL, aider's chat history, Cline's exports, OpenHands' editor and
SWE-agent's templates as the files in ../shared/transcripts show them), and the source class each
fact carries."""

from __future__ import annotations

import json

import pytest

from evalkit.contracts.session import Message, Session, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from evalkit.facts.check import check_labels
from evalkit.facts.extract import SOURCES
from evalkit.importers import import_paths
from tests.conftest import FIXTURES
from tests.support.facts import ids_of, rules_of, session_of
from tests.support.runs import facts_check

LABELS = FIXTURES / "labels"


def _claude_jsonl(tmp_path, records: list[dict]):
    base = {"sessionId": "c1", "cwd": "/repo", "version": "1.0.0", "isSidechain": False}
    lines = []
    for n, r in enumerate(records):
        lines.append(json.dumps({**base, "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None, **r}))
    p = tmp_path / "c1.jsonl"
    p.write_text("\n".join(lines) + "\n")
    (s,), _ = import_paths([p])
    return s


# --------------------------------------------------------------------------- constraints


def test_ide_context_wrappers_are_not_the_users_words(tmp_path):
    # Claude Code's IDE integration sends the opened file and the selection as text blocks of the
    # user's message, each in its own wrapper with the same boilerplate.
    s = _claude_jsonl(
        tmp_path,
        [
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": "<ide_opened_file>The user opened the file /repo/src/app.ts in the IDE. "
                            "This may or may not be related to the current task.</ide_opened_file>",
                        },
                        {
                            "type": "text",
                            "text": "<ide_selection>The user selected the lines 3 to 9 from /repo/src/app.ts:\n"
                            "// Always validate input before you call the API\nexport function f() {}\n\n"
                            "This may or may not be related to the current task.</ide_selection>",
                        },
                        {"type": "text", "text": "Rename f to parseInput. Don't touch the tests."},
                    ],
                },
            }
        ],
    )
    f = compute_facts(s)
    assert [c.text for c in f.constraints] == ["Don't touch the tests."]
    assert f.constraints[0].source == "user turn"
    # Negative: the same wrapper inside one text block is still not read.
    text = "<ide_selection>Please always run make lint first.</ide_selection>\nFix the build."
    assert rules_of(text) == []


def test_pasted_template_comments_and_checklists_are_not_rules():
    pasted = (
        "Write the PR description for this change using our template:\n\n"
        "## Pull request title\n<!-- Please make sure the title follows conventional commits -->\n"
        "## Checklist\n- [ ] You must add a changelog entry\n- [ ] I have run the tests\n"
    )
    assert rules_of(pasted) == []
    # Negative: the user's own rule after the pasted template still binds.
    assert rules_of(pasted + "\nDon't push the branch yourself.") == ["Don't push the branch yourself."]


SWE_TEMPLATE = """<uploaded_files>
/workspace/repo
</uploaded_files>
<issue_description>
The parser never returns. You should always close the stream.
</issue_description>

Can you help me implement the necessary changes to the repository so that the requirements specified in the <issue_description> are met?
This means you DON'T have to modify the testing logic or any of the tests in any way!
Your task is to make the minimal changes to non-test files in the /workspace directory to ensure the <issue_description> is satisfied.
Follow these steps to resolve the issue:
1. As a first step, it might be a good idea to explore the repo to familiarize yourself with its structure.
2. Create a script to reproduce the error and execute it with `python <filename.py>` using the BashTool, to confirm the error.
3. Rerun your reproduce script and confirm that the error is fixed!
4. Think about edgecases and make sure your fix handles them as well.
Your thinking should be thorough and so it's fine if it's very long.
"""


def test_task_template_binds_only_its_scope_and_environment_rules():
    f = compute_facts(session_of(Message("s:m0", "user", [Text(SWE_TEMPLATE)])))
    assert [c.keyword for c in f.constraints] == ["don't", "minimal changes"]
    assert {c.source for c in f.constraints} == {"task template"}
    # Negative: the numbered workflow, the line after it and the pasted issue's "should always".
    texts = " ".join(c.text for c in f.constraints)
    for advice in ("Create a script", "Rerun", "edgecases", "thorough", "close the stream"):
        assert advice not in texts


def test_template_tips_hedged_advice_is_not_a_rule_but_environment_limits_are():
    tips = (
        "INSTRUCTIONS:\nSolve the challenge.\n\nIMPORTANT TIPS:\n"
        "1. Try to AVOID brute force attacks, but when you encounter one, use a script.\n"
        "2. If you open a file, don't just use the scroll_down command multiple times.\n"
        "3. DO NOT run any command that produces binary output! Instead try to use `hexdump`.\n"
        "4. Do not try to install any packages with `pip`.\n"
    )
    assert rules_of(tips) == [
        "DO NOT run any command that produces binary output!",
        "Do not try to install any packages with `pip`.",
    ]


def test_a_sub_agent_task_that_writes_a_document_reads_its_study_steps_as_process():
    # The shape of a codemie-code sub-agent's prompt: analyse, then write the spec.
    task = (
        "Analyze the existing CLI structure and create a detailed specification for the new command.\n\n"
        "Your task:\n"
        "1. Review existing CLI commands in `src/cli/commands/` and `bin/` directories\n"
        "2. Analyze the current command patterns and architecture (Commander.js patterns)\n"
        "3. Write the specification to `docs/spec.md`\n"
    )
    assert rules_of(task) == [
        "Review existing CLI commands in `src/cli/commands/` and `bin/` directories",
        "Analyze the current command patterns and architecture (Commander.js patterns)",
    ]
    # Negative: an investigation only (the coderabbit helper's shape): its steps are the task.
    probe = (
        "Examine the extract-coderabbit-feedback.py file to understand:\n"
        "1. Where HTML cleaning currently happens\n\n"
        "Look specifically at:\n- clean_html_artifacts function\n\n"
        "Analyze how inline comments are processed.\n"
    )
    assert rules_of(probe) == []


def test_an_investigation_stated_as_a_need_to_know_keeps_its_steps_as_the_task():
    # A coderabbit-review-helper sub-agent's prompt: the need to know, numbered checks, a summary.
    probe = (
        "I need to understand the current project structure to help make it installable. Please:\n\n"
        "1. Check if there's already a pyproject.toml file and examine its contents\n"
        "2. Look at the main Python script to understand the entry points\n\n"
        "Return a summary of:\n- Current project structure\n"
    )
    assert rules_of(probe) == []
    # Negative: the same checks after a request to change something are process steps.
    change = probe.replace("I need to understand", "Package").replace(" to help make it installable", "")
    # (a reading step before the change is one too: heldout40b's "Look eg. at the transactionService").
    assert rules_of(change) == [
        "Check if there's already a pyproject.toml file and examine its contents",
        "Look at the main Python script to understand the entry points",
    ]


def test_research_is_not_re_search():
    # The ef958aa1 sub-agents' task line: "Research X — …" names the task, it is no process step.
    assert rules_of(
        "You are carol, a teammate. Research Steve Yegge's Beads — his proposal. Do not push."
    ) == ["Do not push."]
    # Negative: re-running and searching first are process steps.
    assert rules_of("Fix it. Re-run the tests. Search the docs first.") == [
        "Re-run the tests.",
        "Search the docs first.",
    ]


def test_a_step_ordered_before_the_deliverable_counts_even_as_the_opening():
    # A codemie-code turn: the frame names the deliverable, the step before it is process.
    turn = (
        "before providing proposal for phase 4.1 check existing implementation for metrics. "
        "errors handling is already present in metrics."
    )
    assert rules_of(turn) == [
        "before providing proposal for phase 4.1 check existing implementation for metrics."
    ]
    # Negative: an opening request with no order frame is the task; a frame with no process verb
    # states nothing about how to work.
    assert rules_of("check existing implementation for metrics.") == []
    assert rules_of("After reading the docs write the summary.") == []


def test_make_sure_binds_the_agent_not_the_code():
    # A requirement on the code's behaviour (cline exports, codemie sessions) is the task.
    for text in (
        "Compare the two files. Make sure they are equivalent.",
        "Sync the routes. Make sure the Python version does exactly the same as the Typescript version.",
        "Fix sync. also there is a need to make sure that conversation sync will also be tracked properly.",
    ):
        assert rules_of(text) == [], text
    # Negative: "make sure" with the agent or its checks as subject stays a rule.
    assert rules_of("Fix it. Make sure to run the linter before you commit.") == [
        "Make sure to run the linter before you commit."
    ]
    assert rules_of("Fix it. Make sure the tests pass before you push.") == [
        "Make sure the tests pass before you push."
    ]
    # Negative: a standing property of all the work ("keep it backwards compatible") stays a rule.
    compat = (
        "Please make sure the batch export keeps working for the customers who still call the v1 endpoint."
    )
    assert rules_of("Fix it. " + compat) == [compat]
    step = "Make sure every new module in queue has a test file next to it before you move on."
    assert rules_of("Fix it. " + step) == [step]


def test_use_x_instead_of_y_as_the_codes_behaviour_is_the_task():
    text = "finish up the work by rigging up the chatbot-ui to use lmstudio instead of ollama."
    assert rules_of(text) == []
    # Negative: the same wording addressed to the agent is a tool rule.
    assert rules_of("Add the route. I want you to use pnpm instead of npm.") == [
        "I want you to use pnpm instead of npm."
    ]


def test_tools_to_study_with_and_a_file_named_before_its_imperative():
    # Codex sessions: a later turn opening with the tools to learn with, and a fronted file name.
    turn = (
        "use app tools to go to Analytics tabs in the platform opened in google chrome to understand "
        "capabilities. there is a need to prepare a focused demo scenario"
    )
    assert rules_of(turn) == [
        "use app tools to go to Analytics tabs in the platform opened in google chrome to understand capabilities."
    ]
    req = 'wire the UI to the new endpoint. "LM Studio configuration.md" read this to help you'
    assert rules_of(req) == ['"LM Studio configuration.md" read this to help you']
    # Negative: a tool named as the whole request is the task; a quoted name that is not the
    # imperative's object stays a statement.
    assert rules_of("Use the web browser tool to navigate to https://www.aisi.gov.uk/.") == []
    assert rules_of('wire the UI. "config.md" has the endpoints') == []


def test_a_heading_before_the_request_is_not_the_request():
    # Codex Desktop wraps the request: "# Files mentioned by the user:" … "## My request for Codex:".
    text = (
        "# Files mentioned by the user:\n\n## bench.toml: /Users/u/bench.toml\n\n"
        "## My request for Codex:\nrun the benchmark suite and report the numbers\n"
    )
    assert rules_of(text) == []  # the request itself, not a rule on how to work
    # Negative: a process step after the request still counts.
    assert rules_of(text + "Run it twice.\n") == ["Run it twice."]


def test_a_short_standing_imperative_inside_a_longer_turn_is_a_constraint():
    # A later turn's imperative that sets a property of all the work from then on.
    turn = (
        "Thanks, that works in Chrome now. The tiles look great. Let's make it cross-browser. "
        "Also the score should animate."
    )
    assert rules_of(turn) == ["Let's make it cross-browser."]
    offline = "That fixed it. Now make it work without network access, the CI box is offline."
    assert rules_of(offline) == ["Now make it work without network access, the CI box is offline."]
    # Negative: a one-off change to a named thing is the task.
    assert rules_of("Good progress on the exporter. Make `delimiter` an optional param. Then add CSV.") == []
    assert rules_of("Good progress. Rename Exporter to CsvExporter and make it faster.") == []
    assert rules_of("Fix it. Make it work without the cache.") == []


def test_claude_code_rejection_reason_is_a_constraint(tmp_path):
    reason = (
        "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
        "edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\n"
        "use pnpm instead of npm. You already ran it once."
    )
    s = _claude_jsonl(
        tmp_path,
        [
            {"type": "user", "message": {"role": "user", "content": "Install the deps and build."}},
            {
                "type": "assistant",
                "message": {
                    "id": "a1",
                    "role": "assistant",
                    "model": "m",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "npm ci"}}
                    ],
                },
            },
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": reason, "is_error": True}
                    ],
                },
            },
        ],
    )
    f = compute_facts(s)
    assert [(c.text, c.source) for c in f.constraints] == [("use pnpm instead of npm.", "rejection reason")]
    assert [x.source for x in f.failures] == ["rejection"]
    assert ids_of(f, "error") == set()  # a user's rejection is no error anchor
    # Negative: a rejection with no reason, and a reason that only states a fault.
    assert rules_of("You didn't remove whitespaces in otherwise empty lines", reason=True) == []
    assert rules_of("Install the deps and build.") == []


def test_cline_denial_feedback_is_a_rejection_reason(tmp_path):
    text = (
        "**User:**\n\n<task>\nConfigure pytest.\n</task>\n\n---\n\n**Assistant:**\n\n"
        "<execute_command>\n<command>pytest -v</command>\n</execute_command>\n\n---\n\n**User:**\n\n"
        "[execute_command for 'pytest -v'] Result:\nThe user denied this operation and provided the following "
        "feedback:\n<feedback>\nAdd the pytest configuration to the .vscode settings\n</feedback>\n"
    )
    p = tmp_path / "task.md"
    p.write_text(text)
    (s,), _ = import_paths([p])
    f = compute_facts(s)
    assert [(c.text, c.source) for c in f.constraints] == [
        ("Add the pytest configuration to the .vscode settings", "rejection reason")
    ]
    # Negative: the same words as the opening request of a turn are the task.
    assert rules_of("Add the pytest configuration to the .vscode settings") == []


AIDER = """# aider chat started at 2024-08-09 18:45:35

> Aider v0.48.1
> Models: claude-3-5-sonnet-20240620 with diff edit format

#### add a --verbose flag to main

Here is the change:

aider/main.py
```
<<<<<<< SEARCH
def main():
=======
def main(verbose=False):
>>>>>>> REPLACE
```

> Applied edit to aider/main.py
> Commit 1a2b3c4 feat: add verbose flag
> You can use /undo to undo and discard each aider commit.
> Run shell command?
(y/n/instructions) don't run the tests yet, just fix the import
> Add tests/test_main.py to the chat?
(y/n/instructions) n

The edit did not apply cleanly:

aider/io.py
```
<<<<<<< SEARCH
def get_input(self):
=======
def get_input(self, fnames):
>>>>>>> REPLACE
```

> # 1 SEARCH/REPLACE block failed to match!
>
> ## SearchReplaceNoExactMatch: The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc
"""


def test_aider_answers_commits_and_failed_blocks(tmp_path):
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(AIDER)
    (s,), _ = import_paths([p])
    f = compute_facts(s)
    # What the user typed at a (y/n/instructions) prompt is the user's words; a bare "n" is not.
    assert [c.text for c in f.constraints] == ["don't run the tests yet, just fix the import"]
    # aider's commit SHA is an anchor; the failed SEARCH/REPLACE is a failing edit of aider/io.py.
    assert "1a2b3c4" in ids_of(f, "sha")
    assert [(x.tool, x.source) for x in f.failures] == [("edit", "error flag")]
    failed = s.messages[f.failures[0].message_index].tool_results()[0].output
    assert failed.startswith("# 1 SEARCH/REPLACE block failed to match!")
    assert [x.path for x in f.files_modified] == ["aider/main.py"]
    # Symbols from the REPLACE half of both blocks (the edit the model wrote), not its SEARCH half.
    assert {"main", "get_input"} <= ids_of(f, "symbol")


def test_aider_failure_words_in_the_models_text_are_no_failure(tmp_path):
    # Negative for SearchReplaceNoExactMatch: the model saying the words is not aider reporting them.
    said = AIDER.split("The edit did not apply cleanly:")[0] + (
        "I will avoid a SearchReplaceNoExactMatch by copying the lines exactly.\n"
    )
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(said)
    (s,), _ = import_paths([p])
    assert compute_facts(s).failures == []


def test_aider_lint_errors_fail_the_edit(tmp_path):
    lint = (
        "> Applied edit to tests/test_repomap.py\n> Commit 978cc55 style: Fix formatting\n>\n"
        "> # Fix any errors below, if possible.\n>\n"
        "> ## Running: flake8 tests/test_repomap.py\n>\n"
        "> tests/test_repomap.py:332:20: F821 undefined name 'GitRepo'\n"
        "> with GitRepo() as repo:\n> ^\n>\n"
    )
    head = AIDER.split("#### add")[0] + "#### use GitRepo in the test\n\nOk.\n\n"
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(head + lint)
    (s,), _ = import_paths([p])
    f = compute_facts(s)
    assert [(x.source, x.tool) for x in f.failures] == [("lint", "edit")]
    assert "tests/test_repomap.py:332:20: F821 undefined name 'GitRepo'" in ids_of(f, "error")
    assert [x.path for x in f.files_modified] == ["tests/test_repomap.py"]  # the edit was applied
    # Negative: the same edit with no lint report does not fail.
    p.write_text(head + "> Applied edit to tests/test_repomap.py\n> Commit 978cc55 style: Fix formatting\n")
    (s,), _ = import_paths([p])
    assert compute_facts(s).failures == []


def _cline_write(result: str) -> Session:
    return session_of(
        Message("s:m0", "user", [Text("fix the agents")]),
        Message(
            "s:m1",
            "assistant",
            [ToolCall("w1", "write_to_file", {"path": "backend/a.py", "content": "def f():\n    pass\n"})],
        ),
        Message("s:m2", "tool", [ToolResult("w1", result)]),
    )


def test_cline_new_problems_in_the_written_file_fail_the_edit():
    ok = "The content was successfully saved to backend/a.py."
    own = (
        f"{ok}\n\nNew problems detected after saving the file:\nbackend/a.py\n"
        "- [Pylint Error] Line 4: No name 'g' in module 'backend.b'\n- [Pylint Warning] Line 9: unused"
    )
    f = compute_facts(_cline_write(own))
    assert [x.source for x in f.failures] == ["lint"]
    assert ids_of(f, "error") == {"[Pylint Error] Line 4: No name 'g' in module 'backend.b'"}
    assert [x.path for x in f.files_modified] == ["backend/a.py"]
    # Negative: errors only in other files, or only warnings in this one.
    other = f"{ok}\n\nNew problems detected after saving the file:\nbackend/b.py\n- [Mypy Error] Line 1: bad"
    warn = f"{ok}\n\nNew problems detected after saving the file:\nbackend/a.py\n- [Pylint Warning] Line 9: unused"
    assert compute_facts(_cline_write(other)).failures == []
    assert compute_facts(_cline_write(warn)).failures == []


def _editor(output: str) -> Session:
    return session_of(
        Message("s:m0", "user", [Text("fix it")]),
        Message(
            "s:m1",
            "assistant",
            [ToolCall("e1", "str_replace_editor", {"command": "view", "path": "/workspace/src/lib"})],
        ),
        Message("s:m2", "tool", [ToolResult("e1", output)]),
    )


def test_openhands_editor_error_invalid_is_a_failure():
    out = "ERROR:\nInvalid `path` parameter: /workspace/src/lib. The path /workspace/src/lib does not exist."
    f = compute_facts(_editor(out))
    assert [x.source for x in f.failures] == ["refusal"]
    assert ids_of(f, "error") == {
        "Invalid `path` parameter: /workspace/src/lib. The path /workspace/src/lib does not exist."
    }
    # Negative: the editor's ordinary answer.
    assert (
        compute_facts(
            _editor("Here's the files and directories up to 2 levels deep in /workspace/src/lib")
        ).failures
        == []
    )


def _codex_rollout(tmp_path, output: str):
    """A Codex rollout with one browser-tool call (the shape of codemie-code's rollouts)."""
    recs = [
        {"type": "session_meta", "payload": {"id": "cx1", "cwd": "/repo", "cli_version": "0.128.0"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "open the local UI and check the tabs"}],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "js",
                "arguments": json.dumps({"code": "await tab.goto('http://localhost:5173');"}),
                "call_id": "call_1",
            },
        },
        {
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "call_1", "output": output},
        },
    ]
    p = tmp_path / "rollout-2026-05-11T13-28-45-cx1.jsonl"
    p.write_text("\n".join(json.dumps({"timestamp": "2026-05-11T11:46:37Z", **r}) for r in recs) + "\n")
    (s,), _ = import_paths([p])
    return s


def test_codex_browser_policy_rejection_is_a_failure(tmp_path):
    # The rejection sits inside a JSON content-part list under Codex's "Wall time … Output:" header.
    reason = (
        "Browser Use rejected this action due to browser security policy. Reason: The user has "
        "requested that http://localhost:5173 should not be used. The agent must not attempt to "
        "achieve the same outcome via workaround."
    )
    out = "Wall time: 1017.0997 seconds\nOutput:\n" + json.dumps([{"type": "text", "text": reason}])
    f = compute_facts(_codex_rollout(tmp_path, out))
    assert [x.source for x in f.failures] == ["rejection"]
    (err,) = ids_of(f, "error")
    assert err.startswith("Browser Use rejected this action due to browser security policy. Reason: The user")
    # Negative: the same tool's ordinary answer in the same envelope.
    ok = "Wall time: 2.4 seconds\nOutput:\n" + json.dumps([{"type": "text", "text": '{"title": "Codemie"}'}])
    assert compute_facts(_codex_rollout(tmp_path, ok)).failures == []


def _swe_submit(*answers: str) -> Session:
    msgs = [Message("s:m0", "user", [Text("We're currently solving the following CTF challenge.")])]
    for n, (flag, out) in enumerate(zip(("flag{a}", "flag{a}", "'flag{a}'"), answers, strict=False)):
        msgs.append(
            Message(
                f"s:m{2 * n + 1}", "assistant", [ToolCall(f"c{n}", "bash", {"command": f"submit {flag}"})]
            )
        )
        msgs.append(Message(f"s:m{2 * n + 2}", "tool", [ToolResult(f"c{n}", out)]))
    return session_of(*msgs)


def test_ctf_wrong_flag_is_a_failing_submit_without_an_anchor():
    trailer = "\n(Open file: n/a)\n(Current directory: /ctf)\nbash-$"
    f = compute_facts(_swe_submit("Wrong flag!" + trailer, "Wrong flag!" + trailer, "\nflag{a}\n"))
    assert [(x.message_index, x.source) for x in f.failures] == [(2, "refusal"), (4, "refusal")]
    assert all(x.fixed_at == 6 for x in f.failures)  # the same flag submitted again was accepted
    assert ids_of(f, "error") == set()  # generic: nothing of the call in it
    # Negative: a flag that was accepted, and output that merely mentions a wrong flag.
    later = "The checker said: Wrong flag! earlier" + trailer
    assert compute_facts(_swe_submit("\nflag{a}\n", later)).failures == []


# --------------------------------------------------------------------------- identifiers


def _shell(output: str, code: int | None, cmd: str = "make") -> Session:
    return session_of(
        Message("s:m0", "user", [Text("build it")]),
        Message("s:m1", "assistant", [ToolCall("c1", "bash", {"command": cmd})]),
        Message("s:m2", "tool", [ToolResult("c1", output, code not in (None, 0), code)]),
    )


def test_generic_harness_messages_and_wrappers_are_not_error_anchors():
    generic = _editor("ERROR:\nParameter `old_str` is required for command: str_replace.")
    f = compute_facts(generic)
    assert len(f.failures) == 1 and ids_of(f, "error") == set()
    make = "cc -c src/a.c\nsrc/a.c:3:1: error: expected ';' before '}' token\nmake: *** [Makefile:12: all] Error 2"
    assert ids_of(compute_facts(_shell(make, 2)), "error") == {
        "src/a.c:3:1: error: expected ';' before '}' token"
    }
    # A checker's summary line is not the error; its diagnostic is.
    tsc = "src/a.ts:220:7 - error TS2339: Property 'quota' does not exist\n\nFound 1 error in src/a.ts:220"
    assert ids_of(compute_facts(_shell(tsc, 2, "npx tsc")), "error") == {
        "src/a.ts:220:7 - error TS2339: Property 'quota' does not exist"
    }
    # Negative: a refusal that quotes the call's argument is specific, and stays an anchor.
    quoted = "ERROR:\nNo replacement was performed, old_str `x = 1` did not appear verbatim in /a.py."
    assert ids_of(compute_facts(_editor(quoted)), "error") == {
        "No replacement was performed, old_str `x = 1` did not appear verbatim in /a.py."
    }


def test_urls_in_written_content_are_not_anchors_but_fetched_ones_are():
    s = session_of(
        Message("s:m0", "user", [Text("add a test")]),
        Message(
            "s:m1",
            "assistant",
            [
                ToolCall(
                    "w1",
                    "write_to_file",
                    {"path": "t.py", "content": 'URL = "https://example.com/1"\ndef test_a():\n    pass\n'},
                ),
                ToolCall("c1", "bash", {"command": "curl -s https://api.github.com/repos/o/r"}),
            ],
        ),
        Message("s:m2", "tool", [ToolResult("w1", "saved")]),
        Message("s:m3", "tool", [ToolResult("c1", '{"html_url": "https://github.com/o/r"}', False, 0)]),
    )
    f = compute_facts(s)
    assert ids_of(f, "url") == {"https://api.github.com/repos/o/r"}
    assert ids_of(f, "symbol") == {"test_a"}


def test_cline_replace_in_file_symbols_come_from_the_replace_half():
    diff = "<<<<<<< SEARCH\ndef old_name(x):\n=======\ndef new_helper(x):\n>>>>>>> REPLACE"
    s = session_of(
        Message("s:m0", "user", [Text("rename it")]),
        Message("s:m1", "assistant", [ToolCall("r1", "replace_in_file", {"path": "a.py", "diff": diff})]),
        Message("s:m2", "tool", [ToolResult("r1", "The content was successfully saved to a.py.")]),
    )
    f = compute_facts(s)
    assert ids_of(f, "symbol") == {"new_helper"}
    assert [x.path for x in f.files_modified] == ["a.py"]


def test_defined_functions_and_classes_are_symbols_but_used_ones_are_not():
    new = "class CsvExporter(Exporter):\n    def write_rows(self, rows):\n        return dump(rows)\n"
    s = session_of(
        Message("s:m0", "user", [Text("add a CSV exporter")]),
        Message(
            "s:m1",
            "assistant",
            [
                ToolCall(
                    "e1",
                    "Edit",
                    {
                        "file_path": "/repo/x.py",
                        "old_string": "class OldExporter:\n    pass\n",
                        "new_string": new,
                    },
                )
            ],
        ),
        Message("s:m2", "tool", [ToolResult("e1", "The file /repo/x.py has been updated.")]),
        Message(
            "s:m3",
            "assistant",
            [ToolCall("c1", "Bash", {"command": "python -c 'CsvExporter().write_rows([])'"})],
        ),
        Message("s:m4", "tool", [ToolResult("c1", "", False, 0)]),
    )
    f = compute_facts(s)
    # Negative: the replaced class, the base class and the names only called are not definitions.
    assert ids_of(f, "symbol") == {"CsvExporter", "write_rows"}


def test_a_sha_in_tool_output_is_not_an_anchor_but_a_harness_commit_is():
    log = "1a2b3c4 feat: add flag\n5d6e7f8 fix: typo"
    assert ids_of(compute_facts(_shell(log, 0, "git log --oneline -2")), "sha") == set()
    commit = session_of(
        Message("s:m0", "user", [Text("add a flag")]),
        Message("s:m1", "assistant", [ToolCall("e1", "edit", {"path": "a.py"})], {"synthetic": True}),
        Message("s:m2", "tool", [ToolResult("e1", "Applied edit to a.py\nCommit 1a2b3c4 feat: add flag")]),
    )
    f = compute_facts(commit)
    assert ids_of(f, "sha") == {"1a2b3c4"}
    assert {i.source for i in f.identifiers} == {"harness commit"}


# --------------------------------------------------------------------------- sources and --check


def test_every_fact_source_is_a_named_class(transcripts):
    sessions, _ = import_paths([transcripts / "cline", transcripts / "aider"])
    for s in sessions:
        f = compute_facts(s)
        assert {c.source for c in f.constraints} <= set(SOURCES["constraints"])
        assert {x.source for x in f.failures} <= set(SOURCES["failures"])
        assert {i.source for i in f.identifiers} <= set(SOURCES["identifiers"])


def test_a_no_result_placeholder_is_not_a_failure():
    s = session_of(
        Message("s:m0", "user", [Text("go on")]),
        Message("s:m1", "assistant", [ToolCall("w1", "write_to_file", {"path": "a.py", "content": "x"})]),
        Message(
            "s:m2",
            "tool",
            [ToolResult("w1", "[no result recorded: the session ended]", True)],
            {"synthetic": True, "missing_result": True},
        ),
    )
    f = compute_facts(s)
    assert f.failures == [] and f.files_modified == []


def test_facts_check_prints_scores_per_source_class(transcripts):
    out = facts_check(LABELS / "dev37.json", transcripts)
    assert "| labels | fact | source class | precision |" in out
    assert "| dev37.json | failures | lint |" in out
    assert "| dev37.json | constraints | rejection reason |" in out


def test_label_files_pin_the_sessions_they_label(transcripts, tmp_path):
    # dev37, heldout37 and dev38 name each session by path and sha256 (nothing of it is copied here).
    for name, n in (("dev37.json", 9), ("heldout37.json", 9), ("dev38.json", 5)):
        entries = json.loads((LABELS / name).read_text())
        assert len(entries) == n and all(len(e["sha256"]) == 64 for e in entries)
    wrong = json.loads((LABELS / "dev37.json").read_text())[:1]
    wrong[0]["sha256"] = "0" * 64
    p = tmp_path / "wrong.json"
    p.write_text(json.dumps(wrong))
    with pytest.raises(ValueError, match="sha256"):
        check_labels(p, transcripts)


@pytest.mark.parametrize(
    "name", ["dev37.json", "dev38.json", "heldout37.json", "heldout38.json", "heldout39.json"]
)
def test_dev_labels_meet_the_targets(transcripts, name):
    """dev37 and dev38 are what the issue #37 rule changes were measured on, and heldout37,
    heldout38 and heldout39 once their one measurement was made and read (each held-out set is
    measured once, by hand, and reported; none is asserted here before that, so that no test run
    tunes against it)."""
    result = check_labels(LABELS / name, transcripts)
    t = result.totals()
    assert t["failures"].precision >= 0.95 and t["failures"].recall >= 0.95
    assert t["constraints"].precision >= 0.85 and t["constraints"].recall >= 0.85
    assert t["identifiers"].precision >= 0.90 and t["identifiers"].recall >= 0.90
    assert t["files_modified"].precision >= 0.95 and t["files_modified"].recall >= 0.98
