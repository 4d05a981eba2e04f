"""Fact extraction on the real transcripts (issue #2's criterion; needs the importers).

Every real sample goes through compute_facts without a crash; for four sessions the tallies,
failing commands and constraints are asserted exactly. Expected values were checked by hand on
the raw files as each test describes (grep of the runner summary lines, exit codes read from the
observation records, the user's lines read one by one).
"""

from __future__ import annotations

from evalkit.facts import compute_facts
from evalkit.importers import import_paths


def _facts(path):
    (s,), report = import_paths([path])
    assert not report.problems
    return compute_facts(s)


def test_facts_over_every_real_sample(transcripts):
    sessions, report = import_paths([transcripts])
    # Only the Cline exports' calls left unanswered when the export ends, and one tool use cut off
    # before its closing tag (tests/importers/test_real_transcripts.py).
    assert set(report.problems) <= {"call without result", "cline unclosed tool"}
    facts = [compute_facts(s) for s in sessions]
    assert [f.session for f in facts] == [s.id for s in sessions]
    for s, f in zip(sessions, facts, strict=True):
        for t in f.tallies:  # a tally points at a real tool result and its own line
            out = s.messages[t.message_index].tool_results()
            assert any(r.output[t.offset :].lstrip().startswith(t.line[:20]) for r in out)
        for c in f.constraints:
            assert s.messages[c.message_index].is_genuine_user()


def test_claude_code_12a546d1_tallies(transcripts):
    # grep '=== … in N.NNs ===' on the raw file: 5 distinct pytest summaries (each appears twice:
    # in the tool_result and in toolUseResult.stdout). The only is_error result (line 90) is the
    # "1 failed, 19 passed" run; its command is never re-run verbatim (the later passing run drops
    # --tb=short), which fixes it: the same target re-run with other flags counts (issue #13).
    # CC of that age did not prefix "Exit code N": no exit code.
    f = _facts(
        transcripts
        / "claude-code/daaain-claude-code-log/-Users-dain-workspace-claude-code-log-sample__12a546d1-83a7-49a6-abba-5400db340b43.jsonl"
    )
    assert [(t.runner, t.passed, t.failed) for t in f.tallies] == [
        ("pytest", 1, 0),
        ("pytest", 1, 0),
        ("pytest", 19, 1),
        ("pytest", 1, 0),
        ("pytest", 20, 0),
    ]
    assert [(x.command, x.exit_code, x.fixed_at) for x in f.failures] == [
        ("uv run pytest -m browser -v --tb=short", None, 75)
    ]
    assert f.constraints == []


def test_claude_code_2b4ed4c0_failures(transcripts):
    # Bash results with is_error:true on lines 12, 14, 17, 21 (permission refusals); no runner output;
    # the one user line ("Search if claude -p can make use of …") states no rule.
    f = _facts(
        transcripts
        / "claude-code/daaain-claude-code-log/-src-experiments-claude_p__2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl"
    )
    assert [x.error_line for x in f.failures[1:-1]] == [
        'This Bash command contains multiple operations. The following part requires approval: claude -p "What tools are available to you? List them all." 2>&1',
        "This command requires approval",
        "This command requires approval",
        "ls in '~/.claude' was blocked. For security, Claude Code may only list files in the allowed working directories for this session: '/src/experiments/claude_p'.",
    ]
    assert (f.tallies, f.constraints) == ([], [])


def test_openhands_ponyc_4595(transcripts):
    # Run observations with extras.metadata.exit_code != 0: ids 36 (127), 38 (2), 40 (2), 42 (127),
    # 46 (127); none re-run with the same command afterwards. The task message's lines with a rule
    # marker, read one by one: 7 (don't, always, avoid, DON'T, don't, make sure ×2); its process steps.
    f = _facts(transcripts / "openhands/OpenHands-repo/multi_swe_bench__ponylang__ponyc-4595.json")
    # Plus the editor's "ERROR: No replacement was performed" (id 34) before them.
    assert [x.exit_code for x in f.failures] == [None, 127, 2, 2, 127, 127]
    assert f.failures[0].tool == "str_replace_editor"
    f.failures.pop(0)
    assert [x.command for x in f.failures][1:3] == [
        "cd /workspace/ponylang__ponyc__0.1 && make",
        "make clean && make",
    ]
    assert f.failures[1].error_line == "make: *** [Makefile:192: build] Error 2"
    assert all(x.fixed_at is None for x in f.failures)
    # The pasted issue (<issue_description>…</issue_description>) is quoted material: its "don't",
    # "always" and "avoid" are the issue author's. A task template binds only its scope and
    # environment rules (issue #37): the two "don't" sentences and "minimal changes to non-test
    # files"; its numbered "Follow these steps" workflow and the line after it are advice.
    texts = [c.text for c in f.constraints]
    assert [c.keyword for c in f.constraints] == ["don't", "don't", "minimal changes"]
    assert {c.source for c in f.constraints} == {"task template"}
    for start in (
        "Rerun your reproduce script",
        "Create a script to reproduce",
        "Your thinking should be thorough",
    ):
        assert not any(t.startswith(start) for t in texts), start
    assert f.tallies == []


def test_aider_session0325(transcripts):
    # Lines 279 and 507: "3 failed, 1 passed in 0.35s" and "4 passed in 0.48s", each the output of
    # "#### /test pytest tests/basic/test_io.py". Aider records no exit codes: the first run fails
    # by its tally and the second, the same command, fixes it; the two typed requests state no rule.
    f = _facts(
        transcripts / "aider/Aider-AI-aider/sessions/aider-chat-history__session0325__2024-08-09T18-45-35.md"
    )
    assert [(t.passed, t.failed, t.command) for t in f.tallies] == [
        (1, 3, "pytest tests/basic/test_io.py"),
        (4, 0, "pytest tests/basic/test_io.py"),
    ]
    assert [(x.command, x.fixed_at is not None) for x in f.failures] == [
        ("pytest tests/basic/test_io.py", True)
    ]
    assert f.constraints == []
