"""The error classes heldout39's measurement showed (tests/fixtures/labels/README.md), each with a
positive and a negative case on a real-shaped sample: calls cut off by an interruption (Cline's
export, Claude Code, Codex), a harness's kill notice after what the command printed (SWE-agent),
sub-agent prompts' process and tool rules, requirements on a document, a CTF challenge's
description, generic HTTP status failures and git's global options in call arguments."""

from __future__ import annotations

import json

from evalkit.contracts.session import Message, Session, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from evalkit.importers import import_paths
from tests.support.facts import ids_of, rules_of, session_of
from tests.support.runs import facts_check

# --------------------------------------------------------------------------- failing calls

_RESUMPTION = (
    "Task resumption: This autonomous coding task was interrupted 1 hour ago. It may or may not be "
    "complete, so please reassess the task context. Be aware that the project state may have changed "
    "since then. The current working directory is now '/home/u/Perplexica'."
)


def _cline_export(tmp_path, results: list[tuple[str, str]]) -> Session:
    """A Cline task export (the shape of thetom42-Python-Perplexica's): one tool use per assistant
    block, each answered by a ``[tool for 'path'] Result:`` block. ``results``: (tool use, result)."""
    env = "<environment_details>\n# VSCode Visible Files\nbackend/routes/__init__.py\n</environment_details>"
    parts = [f"**User:**\n\n<task>\nTransform the backend to Python\n</task>\n{env}\n"]
    for use, result in results:
        tag = use.split(">", 1)[0].lstrip("<")
        target = "backend/routes/__init__.py" if tag == "write_to_file" else ""
        head = f"[{tag} for '{target}'] Result:" if target else f"[{tag}] Result:"
        parts.append(f"**Assistant:**\n\n<thinking>\nNext step.\n</thinking>\n\n{use}\n")
        parts.append(f"**User:**\n\n{head}\n{result}\n{env}\n")
    p = tmp_path / "02_Transform_Backend_to_Python.md"
    p.write_text("\n---\n\n".join(parts))
    (s,), _ = import_paths([p])
    return s


_WRITE = (
    "<write_to_file>\n<path>backend/routes/__init__.py</path>\n<content>\n"
    "from fastapi import APIRouter\n\ndef include_routers(app):\n    pass\n</content>\n</write_to_file>"
)
_COMPLETE = "<attempt_completion>\n<result>\nThe backend is transformed.\n</result>\n</attempt_completion>"
_CUT = "Task was interrupted before this tool call could be completed.\n" + _RESUMPTION


def test_a_call_cut_off_by_an_interruption_is_a_failure_fixed_by_the_same_write(tmp_path):
    s = _cline_export(
        tmp_path,
        [(_WRITE, _CUT), (_WRITE, "The content was successfully saved to backend/routes/__init__.py.")],
    )
    f = compute_facts(s)
    assert [(x.tool, x.source, x.fixed_at is not None) for x in f.failures] == [
        ("write_to_file", "interrupted", True)
    ]
    assert ids_of(f, "error") == set()  # the notice holds nothing of the call
    assert [x.path for x in f.files_modified] == ["backend/routes/__init__.py"]  # the later write only
    assert ids_of(f, "symbol") == {"include_routers"}  # the call's new text is still read


def test_an_interruption_after_a_save_or_at_a_completion_is_no_failure(tmp_path):
    # Negative: the save went through and the resumption notice follows it; a completion cut off
    # is answered by the user's next turn (as feedback answers it).
    saved = "The content was successfully saved to backend/routes/__init__.py.\n\n" + _RESUMPTION
    f = compute_facts(_cline_export(tmp_path, [(_WRITE, saved), (_COMPLETE, _CUT)]))
    assert f.failures == []
    assert [x.path for x in f.files_modified] == ["backend/routes/__init__.py"]


def test_the_agents_own_words_about_an_interruption_are_no_failure():
    said = "The task was interrupted before this tool call could be completed, so I will write it again."
    s = session_of(
        Message("s:m0", "user", [Text("go on")]),
        Message(
            "s:m1", "assistant", [Text(said), ToolCall("c1", "execute_command", {"command": "cat notes.md"})]
        ),
        Message(
            "s:m2",
            "tool",
            [ToolResult("c1", "# Notes\nTask was interrupted before this tool call could be completed.\n")],
        ),
    )
    assert compute_facts(s).failures == []


def test_claude_code_and_codex_interruptions_are_the_same_class():
    def cut(output: str) -> Session:
        return session_of(
            Message("s:m0", "user", [Text("run the suite")]),
            Message("s:m1", "assistant", [ToolCall("c1", "Bash", {"command": "pytest -q"})]),
            Message("s:m2", "tool", [ToolResult("c1", output, True)]),
        )

    for out in ("[Request interrupted by user for tool use]", "[aborted: interrupted]"):
        f = compute_facts(cut(out))
        assert [x.source for x in f.failures] == ["interrupted"] and ids_of(f, "error") == set()
    # Negative: a rejection keeps its own class.
    rejected = "The user doesn't want to proceed with this tool use. The tool use was rejected."
    assert [x.source for x in compute_facts(cut(rejected)).failures] == ["rejection"]


def _swe(output: str) -> Session:
    trailer = (
        "\n(Open file: /ctf/server.py)\n(Current directory: /ctf)\n"
        "(Interactive session: connect crypto.chal.csaw.io 1337)\nbash-$"
    )
    return session_of(
        Message("s:m0", "user", [Text("We're currently solving the following CTF challenge.")]),
        Message(
            "s:m1", "assistant", [ToolCall("c1", "bash", {"command": "RsaCtfTool.py --publickey pub1.pub"})]
        ),
        Message("s:m2", "tool", [ToolResult("c1", output + trailer)]),
    )


_PRINTED = (
    "[*] Performing partial_d attack on pub1.pub.\n[!] partial_d internal error...\n"
    "[+] Time elapsed: 0.0005 sec.\n[*] Performing lehmer attack on pub1.pub.\n"
)


def test_a_kill_notice_after_the_commands_output_is_a_timeout_without_an_anchor():
    notice = (
        "EXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 60.0 SECONDS.\n"
        "PLEASE REFINE YOUR RUNNING COMMAND SO IT WILL PRODUCE OUTPUT IN THE SPECIFIED TIME FRAME."
    )
    f = compute_facts(_swe(_PRINTED + notice))
    assert [(x.message_index, x.source) for x in f.failures] == [(2, "timeout")]
    assert ids_of(f, "error") == set()  # not the "internal error" line printed before the kill


def test_the_kill_notice_inside_the_output_is_not_the_harnesss():
    # Negative: a log shown by the command quotes the notice, and more output follows it.
    shown = "run 1: ok\nEXECUTION TIMED OUT\n" + _PRINTED + "[+] Time elapsed: 0.1 sec.\nResults: none"
    assert compute_facts(_swe(shown)).failures == []


def test_a_refused_submission_is_a_failure_but_the_agent_quoting_it_is_not():
    def submit(output: str, said: str = "") -> Session:
        return session_of(
            Message("s:m0", "user", [Text("We're currently solving the following CTF challenge.")]),
            Message("s:m1", "assistant", [Text(said), ToolCall("c1", "bash", {"command": "submit flag{x}"})]),
            Message("s:m2", "tool", [ToolResult("c1", output + "\n(Current directory: /ctf)\nbash-$")]),
        )

    assert [x.source for x in compute_facts(submit("Wrong flag!")).failures] == ["refusal"]
    # Negative: the agent says the words, and the harness accepted the flag.
    assert (
        compute_facts(submit("\nflag{x}\n", said="Wrong flag! said the checker; trying again.")).failures
        == []
    )


# --------------------------------------------------------------------------- identifiers


def _bash(cmd: str, output: str = "", code: int = 0, tool: str = "Bash") -> Session:
    return session_of(
        Message("s:m0", "user", [Text("research the teammates mechanism")]),
        Message("s:m1", "assistant", [ToolCall("c1", tool, {"command": cmd})]),
        Message("s:m2", "tool", [ToolResult("c1", output, code != 0, code)]),
    )


def test_git_global_options_and_a_worktrees_branch_in_call_arguments():
    wt = "-experiments/worktrees/.claude/worktrees/agent-a52886dc"
    f = compute_facts(_bash(f"mkdir -p {wt}/work && git -C {wt} checkout -b bob/research-teammates master"))
    assert ids_of(f, "branch") == {"bob/research-teammates"}
    assert ids_of(f, "dir") == {f"{wt}/work"}  # a path that opens with "-" is no flag when it holds "/"
    assert ids_of(compute_facts(_bash("git worktree add ../wt-a -b alice/plan")), "branch") == {"alice/plan"}
    # Negative: switching to a branch, or a worktree on an existing one, creates none; flags are no dirs.
    assert ids_of(compute_facts(_bash(f"git -C {wt} checkout master")), "branch") == set()
    assert ids_of(compute_facts(_bash("git worktree add ../wt-b bugfix-123")), "branch") == set()
    assert ids_of(compute_facts(_bash("mkdir -p -v out")), "dir") == {"out"}


def _fetch(output: str) -> Session:
    return session_of(
        Message("s:m0", "user", [Text("describe Beads")]),
        Message(
            "s:m1",
            "assistant",
            [ToolCall("f1", "WebFetch", {"url": "https://example.org/beads", "prompt": "x"})],
        ),
        Message("s:m2", "tool", [ToolResult("f1", output, True)]),
    )


def test_a_bare_http_status_failure_is_no_error_anchor():
    for out in (
        "Request failed with status code 404",
        "Request failed with status code 504",
        "HTTP Error 403: Forbidden",
    ):
        f = compute_facts(_fetch(out))
        assert [x.source for x in f.failures] == ["error flag"] and ids_of(f, "error") == set()
    assert ids_of(f, "url") == {"https://example.org/beads"}  # the fetched URL is the anchor
    # Negative: a failure that names what it fetched is specific.
    named = "Failed to fetch https://example.org/beads: status 404"
    assert ids_of(compute_facts(_fetch(named)), "error") == {named}


# --------------------------------------------------------------------------- constraints

_TEAMMATE = """You are **dave**, a teammate in an experimental collaboration. You have been spawned in your own isolated git worktree.

## Your Task (Round 1 of 2)

Research **how Codex sandboxes commands**.

### What to produce

A new markdown document at `work/research-sandbox.md` in your worktree. Aim for ~500–800 words.

Keep it accurate and objective. Do not fabricate benchmark numbers. Use Grep and Glob to find where the sandbox policy is defined before you write.

### How to commit

1. Write the doc.
2. Create a new branch called `dave/research-sandbox` off `main`.
3. Commit with message: `dave: round 1`.

### Important constraints

- Stay within the repository. Do not touch any other worktree.
"""


def test_a_sub_agents_process_and_tool_rules_count():
    got = rules_of(_TEAMMATE)
    assert "Use Grep and Glob to find where the sandbox policy is defined before you write." in got
    assert "Create a new branch called `dave/research-sandbox` off `main`." in got
    assert "Stay within the repository." in got


def test_requirements_on_the_document_are_not_rules_on_the_agent():
    got = rules_of(_TEAMMATE)
    assert "Keep it accurate and objective." not in got
    assert "Do not fabricate benchmark numbers." not in got
    # Negative: the same verbs about the agent's own work, a property of the code, code named
    # with "use", and a branch made in the code are not caught by the exemption or the new rules.
    assert rules_of("Fix the parser. Keep it backwards compatible.") == ["Keep it backwards compatible."]
    assert rules_of("Fix the parser. Do not touch the tests.") == ["Do not touch the tests."]
    assert rules_of("Fix the parser. Use BeautifulSoup to find the links.") == []
    assert rules_of("Fix the parser. Use bash for the install script.") == []
    assert rules_of("Fix the parser. Keep your answer short.") == ["Keep your answer short."]
    assert rules_of("Add a CLI flag. The create a branch command should print its name.") == []
    assert rules_of("Add caching. The service should stay in memory between requests.") == []


def test_a_ctf_challenges_description_is_quoted_material():
    template = (
        "We're currently solving the following CTF challenge. The CTF challenge is a reverse engineering "
        'problem named "Rock", worth 100 points. The description is:\n'
        "Never forget the people's champ. Don't trust the binary.\n"
        "Files included in the challenge: ['rock']\n\n\n\nINSTRUCTIONS:\n"
        "Now, you're going to solve this challenge on your own. You can use any bash commands or the "
        "special interface to help you. Solve the challenge, executing any commands you need and writing "
        "any code that may be helpful. You cannot use any interactive session commands (e.g. python, vim) "
        "in this environment, but you can write scripts and run them.\n"
    )
    got = rules_of(template)
    assert not any("champ" in r or "trust the binary" in r for r in got)
    # Negative: the template's own environment rule after the description still binds.
    assert "You cannot use any interactive session commands (e.g. python, vim) in this environment" in got


# --------------------------------------------------------------------------- evalkit facts --check


def test_facts_check_prints_values_per_kind_and_per_source_class(tmp_path):
    """A Cline export with an interrupted write, a denied read whose feedback is a rule, and the
    write done again. Labels: both failures, the rule and one rule the user never typed, the file,
    the symbol and one symbol no edit defines: each table cell is a count that can be wrong."""
    read = "<read_file>\n<path>backend/db/crud.py</path>\n</read_file>"
    denied = (
        "The user denied this operation and provided the following feedback:\n"
        "<feedback>\nDon't read the database code, only touch the routes.\n</feedback>"
    )
    saved = "The content was successfully saved to backend/routes/__init__.py."
    _cline_export(tmp_path, [(_WRITE, _CUT), (read, denied), (_WRITE, saved)])
    labels = {
        "file": "02_Transform_Backend_to_Python.md",
        "tallies": [],
        "failures": [{"msg": "m00002", "fixed": True}, {"msg": "m00004", "fixed": True}],
        "constraints": [
            {"msg": "m00005", "rule": "Don't read the database code, only touch the routes."},
            {"msg": "m00000", "rule": "Use Python 3.12 only."},
        ],
        "files_modified": ["backend/routes/__init__.py"],
        "identifiers": [
            {"kind": "symbol", "value": "include_routers"},
            {"kind": "symbol", "value": "absent"},
        ],
    }
    lf = tmp_path / "mini.json"
    lf.write_text(json.dumps([labels]))
    out = facts_check(lf, tmp_path)
    for row in (
        "| mini.json | 1 | tallies | n/a | 0/0 | n/a | 0/0 |",
        "| mini.json | 1 | failures | 1.00 | 2/2 | 1.00 | 2/2 |",
        "| mini.json | 1 | constraints | 1.00 | 1/1 | 0.50 | 1/2 |",
        "| mini.json | 1 | files_modified | 1.00 | 1/1 | 1.00 | 1/1 |",
        "| mini.json | 1 | identifiers | 1.00 | 1/1 | 0.50 | 1/2 |",
        "| mini.json | 1 | failures: fixed agrees | 1/2 | | | |",  # the denied read was not read again
        "| mini.json | failures | interrupted | 1.00 | 1/1 | 1.00 | 1/1 |",
        "| mini.json | failures | rejection | 1.00 | 1/1 | 1.00 | 1/1 |",
        "| mini.json | constraints | rejection reason | 1.00 | 1/1 | 1.00 | 1/1 |",
        "| mini.json | constraints | user turn | n/a | 0/0 | 0.00 | 0/1 |",
        "| mini.json | identifiers | edit text | 1.00 | 1/1 | 0.50 | 1/2 |",
    ):
        assert row in out, (row, out)
