"""Facts measured against hand labels (tests/fixtures/labels, rules in its README), and the
extractor's rules on the real wordings issue #13 names: failures of any kind, constraints as
rules not paragraphs, files only from successful calls, identifiers."""

from __future__ import annotations

import pytest

from evalkit.contracts.session import Message, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from evalkit.facts.check import check_labels, same_path, same_rule
from evalkit.facts.commands import files_of, shell_modified
from evalkit.facts.failures import attempt_key, call_failed
from evalkit.facts.identifiers import error_string, in_command, in_text, symbols
from tests.conftest import FIXTURES
from tests.support.facts import rules_of, session_of
from tests.support.runs import facts_check

LABELS = FIXTURES / "labels"

# The "Done when" targets of issue #13 (precision, recall) per fact kind.
TARGETS = {
    "tallies": (0.98, 0.98),
    "failures": (0.95, 0.95),
    "constraints": (0.90, 0.85),
    "files_modified": (0.95, 0.95),
    "identifiers": (0.90, 0.90),
}


def test_tuning_labels_meet_the_targets(transcripts):
    result = check_labels(LABELS / "tune.json", transcripts)
    assert len(result.sessions) == 10
    for kind, score in result.totals().items():
        p, r = TARGETS[kind]
        assert score.label > 0, kind
        assert score.precision is not None and score.precision >= p, (kind, score)
        assert score.recall is not None and score.recall >= r, (kind, score)
    agree, pairs = result.fixed_agreement()
    assert agree == pairs


@pytest.mark.parametrize(
    "labels", ["heldout.json", "heldout2.json", "heldout3.json", "heldout4.json", "heldout5.json"]
)
def test_held_out_labels_meet_the_targets_after_their_fixes(transcripts, labels):
    """Each held-out set, once measured and its bugs fixed (numbers in the labels README), stays at
    or above the targets; a kind a set has no labels for is not scored there."""
    result = check_labels(LABELS / labels, transcripts)
    for kind, score in result.totals().items():
        p, r = TARGETS[kind]
        if score.label:
            assert score.recall is not None and score.recall >= r, (labels, kind, score)
        if score.pred:
            assert score.precision is not None and score.precision >= p, (labels, kind, score)


def test_heldout5_covers_10_sessions_in_4_formats(transcripts):
    sessions = check_labels(LABELS / "heldout5.json", transcripts).sessions
    assert len(sessions) == 10
    assert {s.file.split("/")[0] for s in sessions} == {
        "claude-code",
        "openai-chat",
        "openhands",
        "swe-agent",
    }


def test_labels_cover_15_sessions_in_6_formats(transcripts):
    sessions = [
        s for f in ("tune.json", "heldout.json") for s in check_labels(LABELS / f, transcripts).sessions
    ]
    assert len(sessions) >= 15
    assert len({s.file.split("/")[0] for s in sessions}) >= 6


def test_facts_check_cli_prints_a_table(transcripts):
    out = facts_check(LABELS / "tune.json", transcripts)
    assert "| tune.json | 10 | constraints |" in out
    assert "identifiers" in out


def test_matching_rules():
    assert same_rule(
        "Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME.", "YOU CAN ONLY ENTER ONE COMMAND AT A TIME."
    )
    paragraph = (
        "We ran the whole suite on the branch and saw three flaky failures in io tests. Never push to main."
    )
    assert not same_rule(paragraph, "Never push to main.")
    assert same_path("/repo/aider/io.py", "aider/io.py") and not same_path(
        "/repo/xaider/io.py", "aider/io.py"
    )


# --------------------------------------------------------------------------- constraints


def test_constraints_skip_questions_stray_keywords_and_quotes():
    assert rules_of("does it only run on main?") == []
    assert rules_of("Never mind!") == []
    assert rules_of("Don't worry about the CI for now") == []
    assert rules_of("```\nnever do this\n```\n> Always quote me") == []
    issue = "ISSUE:\nIt must not crash. Never use eval.\n\nINSTRUCTIONS:\nYou must not install packages."
    assert rules_of(issue) == ["You must not install packages."]
    assert rules_of(
        "<issue_description>\nWe always fail here.\n</issue_description>\nKeep the diff small."
    ) == ["Keep the diff small."]


def test_constraints_without_a_keyword_and_as_clauses():
    assert rules_of("Your task is to make the minimal changes to non-test files.") == [
        "Your task is to make the minimal changes to non-test files."
    ]
    assert rules_of("Please run the agents in the background.") == [
        "Please run the agents in the background."
    ]
    assert rules_of("Summarize it in two paragraphs.") == ["Summarize it in two paragraphs."]
    # A rule followed by a permission: the rule's clause only.
    assert rules_of("Note however that you cannot use vim here, but you can write scripts and run them.") == [
        "you cannot use vim here"
    ]
    # A requirement on the code is the task, not a rule for the agent.
    assert rules_of("then it should be moved to `abs_fnames`.") == []


def test_process_directives_are_constraints_but_the_request_is_not():
    # An imperative about how the agent works is a rule, with or without a time frame before it.
    assert rules_of("Build the parser. Commit only after the linter passes. Please wait for my review.") == [
        "Commit only after the linter passes.",
        "Please wait for my review.",
    ]
    assert rules_of("Port the CLI to click. Once you have a draft, run the whole suite again.") == [
        "Once you have a draft, run the whole suite again."
    ]
    # The opening request is the task even when its verb is a process verb; so are verbs that
    # make the artefact or the answer, and permissions.
    assert rules_of("Run the benchmarks and tell me which is fastest.") == []
    assert rules_of("Look at the logs. Fix the crash. Summarize what you changed.") == []
    assert rules_of("Edit all the files you need to and run any checks you want.") == []
    # The agent's work as the subject of an obligation.
    assert rules_of("Refactor io.py. Your reply has to stay under one screen.") == [
        "Your reply has to stay under one screen."
    ]


def test_template_advice_is_not_a_constraint():
    text = (
        "IMPORTANT TIPS:\n1. Always start by trying to replicate the bug.\n"
        "2. Do not try to install any packages with `pip`.\n"
    )
    assert rules_of(text) == ["Do not try to install any packages with `pip`."]


# --------------------------------------------------------------------------- failures


def _res(out: str, exit_code=None, is_error=False) -> ToolResult:
    return ToolResult("c1", out, is_error, exit_code)


def test_failures_of_any_kind():
    bash = ToolCall("c1", "bash", {"command": "grep -r foo src"})
    assert not call_failed(bash, _res("", 1), None)  # grep found nothing
    assert call_failed(bash, _res("grep: src: No such file or directory", 2), None)
    edit = ToolCall("c1", "str_replace_editor", {"command": "str_replace", "path": "a.py"})
    assert call_failed(edit, _res("ERROR:\nNo replacement was performed, old_str `x` did not appear"), None)
    patch = ToolCall("c1", "apply_patch", {"input": "*** Begin Patch"})
    assert call_failed(patch, _res("apply_patch verification failed: Failed to find expected lines"), None)
    rejected = ToolCall("c1", "Bash", {"command": "rm -rf build"})
    assert call_failed(rejected, _res("The user doesn't want to proceed with this tool use."), None)
    assert call_failed(rejected, _res("ok", None, is_error=True), None)


def test_a_test_run_with_failures_fails_where_no_exit_code_is_recorded():
    from evalkit.facts import find_tally

    out = "===== 2 failed, 3 passed in 0.20s ====="
    call = ToolCall("c1", "bash", {"command": "pytest tests/x.py"})
    assert call_failed(call, _res(out), find_tally(out))
    assert not call_failed(call, _res(out, 0), find_tally(out))  # the harness said it exited 0


def test_fix_recognised_for_the_same_target_with_other_flags():
    a = ToolCall("c1", "bash", {"command": "pytest tests/x.py --tb=short 2>&1 | tail -30"})
    b = ToolCall("c2", "bash", {"command": "cd /repo && pytest tests/x.py"})
    assert attempt_key(a) == attempt_key(b) == "pytest tests/x.py"
    assert attempt_key(ToolCall("c3", "bash", {"command": "pytest tests/y.py"})) != attempt_key(a)


# --------------------------------------------------------------------------- files, identifiers


def test_files_modified_from_shell_ignore_quoted_text():
    assert shell_modified('python -c "print(1 > 0)" > out.txt') == ["out.txt"]
    assert shell_modified('gh pr create --title x --body "use {status}{flag} > 2"') == []
    assert shell_modified("cat > notes.md <<'EOF'\nx > y\nEOF") == ["notes.md"]
    assert shell_modified("mv a.py b.py && sed -i 's/x/y/' c.py") == ["a.py", "b.py", "c.py"]
    assert files_of(ToolCall("c", "edit", {"filePath": "src/x.ts"}))[1] == ["src/x.ts"]  # opencode
    assert files_of(ToolCall("c", "edit", {"search": "a", "replace": "b"}), open_file="/r/m.py")[1] == [
        "/r/m.py"
    ]
    # One name per file for every reader of calls (facts, replay's view, continuation's ops).
    assert files_of(ToolCall("c", "write_to_file", {"path": "src\\app.py"}))[1] == ["src/app.py"]
    bob_read = ToolCall(
        "c", "read_file", {"path": "a\\x.py", "files": [{"path": "a\\x.py"}, {"path": "b.py"}]}
    )
    assert files_of(bob_read) == (["a/x.py", "b.py"], [])


def test_failed_or_rejected_edits_modify_nothing():
    s = session_of(
        Message("s:m0", "user", [Text("fix it")]),
        Message(
            "s:m1",
            "assistant",
            [ToolCall("e1", "Edit", {"file_path": "a.py", "new_string": "def f(): pass"})],
        ),
        Message("s:m2", "tool", [ToolResult("e1", "File has not been read yet.", True)]),
        Message(
            "s:m3",
            "assistant",
            [ToolCall("e2", "Edit", {"file_path": "b.py", "new_string": "class K: pass"})],
        ),
        Message("s:m4", "tool", [ToolResult("e2", "The file b.py has been updated.")]),
    )
    f = compute_facts(s)
    assert [x.path for x in f.files_modified] == ["b.py"]
    assert [(x.tool, x.fixed_at) for x in f.failures] == [("Edit", None)]
    ids = {(i.kind, i.value) for i in f.identifiers}
    assert ids >= {("symbol", "f"), ("symbol", "K")}
    # The refusal is a generic harness message (issue #37's anchor index): a failure, no anchor.
    assert not any(k == "error" for k, _ in ids)


def test_batch_edits_refusals_and_the_shell_folder():
    """Regressions found by the heldout3 labels (issue #13): MultiEdit's edits carry new text; a
    harness-flagged refusal of a non-shell call is its first line, not its echoed arguments; a
    relative path is the file in the folder SWE-agent's prompt names."""
    refusal = "Found 2 matches of the string to replace, but replace_all is false.\nString:    x = compute()"
    s = session_of(
        Message("s:m0", "user", [Text("fix it")]),
        Message(
            "s:m1",
            "assistant",
            [
                ToolCall(
                    "e1",
                    "MultiEdit",
                    {"file_path": "t.py", "edits": [{"old_string": "a", "new_string": "def g():"}]},
                )
            ],
        ),
        Message("s:m2", "tool", [ToolResult("e1", refusal, True)]),
        Message("s:m3", "assistant", [ToolCall("c1", "bash", {"command": "ls"})]),
        Message(
            "s:m4", "tool", [ToolResult("c1", "a.py\n(Open file: n/a)\n(Current directory: /repo)\nbash-$")]
        ),
        Message("s:m5", "assistant", [ToolCall("c2", "bash", {"command": "create b.py"})]),
        Message(
            "s:m6", "tool", [ToolResult("c2", "[File: /repo/b.py (1 lines total)]\n(Open file: /repo/b.py)")]
        ),
    )
    f = compute_facts(s)
    ids = {(i.kind, i.value) for i in f.identifiers}
    assert ("symbol", "g") in ids
    # A bare count of matches is a generic harness message (issue #37): the failure has no error
    # anchor, and the echoed argument under it is not one either.
    assert not any(k == "error" for k, _ in ids)
    assert len(f.failures) == 1
    assert [x.path for x in f.files_modified] == ["/repo/b.py"]


def test_pasted_code_and_logs_hold_no_directives():
    pasted = "These fail now:\n\n    def test_x():\n        # Check the content\n        assert x\n\ntest/test_x.py:74: AssertionError\n"
    assert rules_of(pasted) == []


def test_identifiers_in_words_and_commands():
    text = "See PR #12 and https://github.com/o/r/issues/40; the fix is in 3f9c2ab, not the world's #1."
    got = set(in_text(text))
    assert ("pr", "#12") in got and ("pr", "#40") in got and ("sha", "3f9c2ab") in got
    assert ("url", "https://github.com/o/r/issues/40") in got
    assert not any(v == "#1" for _, v in got)
    assert set(in_command("git checkout -b fix/io-7 && mkdir -p out/logs")) == {
        ("branch", "fix/io-7"),
        ("dir", "out/logs"),
    }
    assert list(symbols("def run(x):\n    pass\nclass Box:\n")) == ["run", "Box"]
    assert list(symbols("export const render = (a, b) => a")) == ["render"]
    out = "Traceback (most recent call last):\n  File 'x', line 1\nE   TypeError: 'NoneType' object is not iterable\n"
    assert error_string(out) == "TypeError: 'NoneType' object is not iterable"


@pytest.mark.parametrize("reply", ["y", "n"])
def test_stale_tally_is_unknown(reply):
    """The latest test run printed no tally (crashed): facts record it, so the latest result is
    unknown rather than the previous run's."""
    crashed = (FIXTURES / "runner_output" / "pytest_crashed.txt").read_text()
    passed = (FIXTURES / "runner_output" / "pytest_pass.txt").read_text()
    s = session_of(
        Message("s:m0", "assistant", [ToolCall("t1", "bash", {"command": "pytest"})]),
        Message("s:m1", "tool", [ToolResult("t1", passed, False, 0)]),
        Message("s:m2", "user", [Text(reply)]),
        Message("s:m3", "assistant", [ToolCall("t2", "bash", {"command": "python -m pytest -x"})]),
        Message("s:m4", "tool", [ToolResult("t2", crashed, False, 3)]),
    )
    f = compute_facts(s)
    assert [t.message_index for t in f.tallies] == [1]
    assert f.untallied_runs == [4]


def test_list_headers_and_scaffolding_steps():
    # A sentence that introduces the list below it is its header, not a rule; the steps are read
    # one by one: scaffolding made to check the work and coordinated process verbs are process
    # steps, a step that restates the task is not.
    text = (
        "Port the exporter to the new API.\n"
        "Do the following in order:\n"
        "1. Build a small harness to verify the old output first.\n"
        "2. Change the exporter so it calls the new API.\n"
        "3. Locate and execute the exporter's unit tests.\n"
    )
    assert rules_of(text) == [
        "Build a small harness to verify the old output first.",
        "Locate and execute the exporter's unit tests.",
    ]
    # A header that is itself a rule stays one.
    assert rules_of("Port it. You must run these commands first:") == ["You must run these commands first:"]


def test_long_sentences_keep_their_steps_but_drop_a_reason_or_condition():
    # A rule that ends a list of steps is the whole sentence, not the clause with the marker.
    steps = (
        "Consider the corner cases, write a few extra checks for them in the scratch file, "
        "and execute them to make sure the patch really covers every one of them."
    )
    assert rules_of("Fix the parser. " + steps) == [steps]
    # A reason before "so" and a condition before the rule are lead-ins, left out.
    reason = (
        "Fix the parser. The virtualenv already has every package from the lock file installed "
        "for this project, so you should not install anything else."
    )
    assert rules_of(reason) == ["you should not install anything else."]


def test_code_changes_phrased_as_use_rules_are_the_task():
    # "don't use X, use Y" about names in the code is a change to make, not a rule on the agent.
    assert rules_of("Tidy it. Don't use `make_tmp_dir`, use the fixture instead") == []
    assert rules_of("Tidy it. Use RetryPolicy instead of the hand-rolled loop.") == []
    # The same words about the agent's tools stay rules.
    assert rules_of("Tidy it. Do not use any interactive commands at all!") == [
        "Do not use any interactive commands at all!"
    ]
    assert rules_of("Tidy it.\ndon't use the scroll_down command repeatedly") == [
        "don't use the scroll_down command repeatedly"
    ]


def test_investigation_steps_are_the_task_of_an_investigation():
    text = (
        "Audit the retry handling in client.py for lost requests:\n"
        "1. Review the backoff code (lines 10-40).\n"
        "2. Confirm whether the timeout is applied per attempt.\n"
        "3. Determine if we need to cap the retries.\n"
        "Do not modify any files.\n"
    )
    assert rules_of(text) == ["Do not modify any files."]
    # An investigation that also asks for a change is a change task; asking the user first is a rule.
    assert rules_of(
        "Investigate the slow export and make it faster.\nReview the profiler output first.\n"
        "Please check with me before adding a cache."
    ) == ["Review the profiler output first.", "Please check with me before adding a cache."]
    # Outside an investigation the same checking steps are process.
    assert rules_of("Fix the retry loop. Review the backoff code afterwards.") == [
        "Review the backoff code afterwards."
    ]


def test_a_file_created_before_the_shell_folder_is_known_is_one_file():
    s = session_of(
        Message("s:m0", "user", [Text("fix it")]),
        Message("s:m1", "assistant", [ToolCall("c1", "bash", {"command": "create repro.py"})]),
        Message("s:m2", "tool", [ToolResult("c1", "[File: /testbed/repro.py (1 lines total)]")]),
        Message("s:m3", "assistant", [ToolCall("c2", "bash", {"command": "python repro.py"})]),
        Message("s:m4", "tool", [ToolResult("c2", "ok\n(Open file: n/a)\n(Current directory: /testbed)")]),
        Message("s:m5", "assistant", [ToolCall("c3", "bash", {"command": "echo x > repro.py"})]),
        Message("s:m6", "tool", [ToolResult("c3", "(Current directory: /testbed)")]),
    )
    f = compute_facts(s)
    assert sorted({t.path for t in f.files_modified}) == ["/testbed/repro.py"]


def test_a_checkers_diagnostic_header_is_the_error():
    # ty/rustc print "error[code]: message" then a source excerpt; the excerpt's words ("Cannot
    # test …") are not the error (heldout4).
    out = (
        "WARN ty is pre-release software.\n\nerror[call-non-callable]: Object of type `X` is not callable\n"
        '   --> test/test_cache.py:429:17\n    |\n429 |     pytest.skip("Cannot test permissions")\n'
        "    |\ninfo: rule `call-non-callable` is enabled by default\n\nFound 1 diagnostic"
    )
    assert error_string(out) == "error[call-non-callable]: Object of type `X` is not callable"


def test_rules_joined_to_a_task_sub_agents_git_steps_and_verbless_limits():
    """The heldout4 misses (issue #13), as the rules they follow, on wordings not in that set."""
    # A rule joined to the task by ", and" is the rule's clause; joined to another rule, whole.
    assert rules_of("Fix the docs. Keep the diff small, and after that write me a haiku about it.") == [
        "Keep the diff small"
    ]
    assert rules_of("Fix the docs. Never push to main, and run the linter before you commit.") == [
        "Never push to main, and run the linter before you commit."
    ]
    # An obligation whose subject is the agent's sub-agents; a requirement on other things is not.
    assert rules_of("Spawn three reviewers. Every sub-agent must cite its sources.") == [
        "Every sub-agent must cite its sources."
    ]
    assert rules_of("Write the importer. The parser should return a list.") == []
    # Version control on a branch is a process step; merging code is the task.
    assert rules_of("Write the section.\n\n1. Rebase onto main before you start.") == [
        "Rebase onto main before you start."
    ]
    assert rules_of("Write the section.\n\n1. Rebase the feature branch:") == ["Rebase the feature branch:"]
    assert rules_of("Clean up utils.\n\n2. Merge the two helpers into one function.") == []
    # A verbless prohibition on a kind of tool or action; a verbless statement is not one.
    assert rules_of(
        "Draft the notes.\n\n- No network access.\n- No new dependencies.\n- No conflicts expected."
    ) == [
        "No network access.",
        "No new dependencies.",
    ]
    # An answer's length given as a noun phrase; a length target for the deliverable is not.
    assert rules_of("Report back:\n- A one-paragraph summary of what changed.") == [
        "A one-paragraph summary of what changed."
    ]
    assert rules_of("Extend the guide. Target ~300 additional words total.") == []


def test_bare_stop_sources_and_research_steps():
    """The heldout5 misses (issue #13), as the rules they follow, on wordings not in that set."""
    # A bare order to stop counts even as the whole message; finishing a thing is the task.
    assert rules_of("Stop here please.") == ["Stop here please."]
    assert rules_of("Finish the parser.") == []
    # Sources asked for in the answer are its form.
    assert rules_of("Compare the two designs. Answer with references to the docs.") == [
        "Answer with references to the docs."
    ]
    assert rules_of("Summarize the thread. Cite your sources.") == ["Cite your sources."]
    # A research step before another task is process; in a research request it is the task.
    assert rules_of("Draft the release notes. Then, look up how the last release was announced.") == [
        "Then, look up how the last release was announced."
    ]
    assert (
        rules_of("Do a web search on rust async runtimes. Search for benchmarks too. Give me a table.") == []
    )
