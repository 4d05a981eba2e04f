"""The ``validate`` candidate's own validator (seed 000): a deterministic repair of the summary.

After the summary is final it appends what the summary lacks: the outcome of the latest test
run and its command (when the kept tail shows no test run), the user's own short lines, and a
next step. It has its own notion of each: a *test run* is a shell call whose command names a
test tool or target; its *outcome* is the last line of the output that is not a ruler (where
runners print their summary); the user's lines are the lines of genuine user messages short
enough to be typed, not pasted. It shares no code or pattern with the ground truth
(:mod:`evalkit.facts`) or the probes, which grade it (``tests/models/test_standin_independence.py``).
"""

from __future__ import annotations

import re

from evalkit.contracts.session import Message

# Words in a command that make it a test run (a tool or a target); matched as whole words.
TEST_WORDS = frozenset(
    {
        "test",
        "tests",
        "pytest",
        "jest",
        "vitest",
        "mocha",
        "rspec",
        "phpunit",
        "ctest",
        "tox",
        "nox",
        "spec",
        "check",
    }
)
USER_LINE_CHARS = 400  # longer lines are pasted material, not a typed instruction
PASTE_LINES = 40  # a user message with more lines is a paste
MAX_USER_LINES = 12  # newest first: a repair must stay short
_RULER = re.compile(r"^[\W_]*$")
_NEXT = re.compile(r"^#+ Next[^\n]*\n+\s*(?:\d+\.|[-*])\s*\S", re.M | re.I)


def command_words(command: str) -> set[str]:
    """The command's words, lower-cased (paths split on ``/``, ``.``, ``_`` and ``-``)."""
    return set(re.split(r"[^a-z0-9]+", command.lower())) - {""}


def is_test_run(command: str) -> bool:
    return bool(command_words(command) & TEST_WORDS)


def outcome_line(output: str) -> str:
    """The last line of an output that is not blank or a ruler, without the ruler characters."""
    for line in reversed(output.splitlines()):
        if not _RULER.match(line):
            return line.strip("=-_* \t")
    return ""


def latest_test_run(messages: list[Message]) -> tuple[str, str] | None:
    """(command, outcome line) of the latest test run among ``messages``."""
    commands = {}
    for m in messages:
        for c in m.tool_calls():
            cmd = c.args.get("command") if isinstance(c.args, dict) else None
            if isinstance(cmd, str):
                commands[c.id] = cmd
    for m in reversed(messages):
        for r in reversed(m.tool_results()):
            cmd = commands.get(r.call_id)
            if cmd is not None and is_test_run(cmd) and (line := outcome_line(r.output)):
                return cmd, line
    return None


def user_lines(messages: list[Message]) -> list[str]:
    """The short lines of the genuine user messages (pastes left out), in order, once each."""
    out: dict[str, None] = {}
    for m in messages:
        if not m.is_genuine_user():
            continue
        lines = [ln.strip() for ln in m.text.splitlines() if ln.strip()]
        if len(lines) > PASTE_LINES:
            continue
        out.update((ln, None) for ln in lines if len(ln) <= USER_LINE_CHARS)
    return list(out)


def repair(summary: str, head: list[Message], tail: list[Message]) -> str:
    """``summary`` with the missing parts appended (see the module docstring)."""
    add: list[str] = []
    if latest_test_run(tail) is None and (latest := latest_test_run(head)) and latest[1] not in summary:
        add.append(f"## Latest test result\n- `{latest[0]}`: {latest[1]}")
    users = [m for m in head if m.is_genuine_user()]
    lines = user_lines(users)
    missing = [ln for ln in lines[1:] if ln not in summary][-MAX_USER_LINES:]
    if missing:
        add.append("## User instructions (verbatim)\n" + "\n".join(f"- {ln}" for ln in missing))
    if not _NEXT.search(summary):
        ask = lines[-1][:300] if lines else "Verify and finish."
        add.append(f"## Next Step\n1. {ask}")
    return summary + ("\n\n" + "\n\n".join(add) if add else "")
