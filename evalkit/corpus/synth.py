"""Synthetic coding-agent sessions whose facts are known by construction.

The generator writes sessions that look like a coding agent's: user requests with constraints
scattered among them, bash / read / edit / write traffic, test runs whose tally sits past
character 2,000 in about two thirds of the long ones (seed 000's figure), failing commands (some
fixed later, some not), occasional 50–65 KiB pastes (seed 003), and the PROJECT.md / MEMORY.md
blocks a carry plugin would keep (seed 002). Each session is long enough to force two to six
compactions at the default window (REFERENCES.md §1.A).

Session ``i`` of seed ``S`` depends only on (S, i), so generation parallelises and any session
can be regenerated alone.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

from evalkit.contracts.config import ReplayConfig
from evalkit.contracts.session import Message, Session, Source, Text, Thinking, ToolCall, ToolResult
from evalkit.corpus.outputs import (
    _BUILD_ERRORS,
    MODULES,
    NOUNS,
    VERBS,
    _code,
    _functions,
    _lines_pool,
    _lint_tail,
    _lognormal,
    _pytest_output,
    _text_of,
)
from evalkit.corpus.phrasings import CONSTRAINTS, FOLLOWUPS, PASTE_INTROS, RESUME_OPENERS, TASKS

# Tokens (chars/4) the default trigger fires at: window 200,000 − reserve 16,384.
_TRIGGER = ReplayConfig().window - ReplayConfig().reserve
# Tokens a planned round adds: what the reference compactor's context needs to fill up again after a
# compaction, which leaves keep-recent (20,000) plus a small summary (~18,000 tokens at the median
# on the default corpus). A summary-source budget (seed 003's 64 KiB) clears less per pass and
# compacts more often.
_ROUND = 166_000


@dataclass
class _Builder:
    """Accumulates one session's messages and a running chars/4 token count."""

    sid: str
    rng: random.Random
    messages: list[Message] = field(default_factory=list)
    tokens: int = 0
    calls: int = 0
    module: str = "api"
    pool: list[str] = field(default_factory=list)
    code_pool: list[str] = field(default_factory=list)

    def add(self, role: str, blocks: list) -> Message:
        msg = Message(f"{self.sid}:m{len(self.messages):05d}", role, blocks)  # type: ignore[arg-type]
        self.messages.append(msg)
        chars = 0
        for b in blocks:
            chars += len(getattr(b, "text", "") or getattr(b, "output", "") or "") + (
                len(repr(b.args)) if isinstance(b, ToolCall) else 0
            )
        self.tokens += math.ceil(chars / 4)
        return msg

    def tool(
        self,
        name: str,
        args: dict,
        output: str,
        exit_code: int | None = None,
        is_error: bool = False,
        say: str | None = None,
    ) -> None:
        self.calls += 1
        cid = f"call_{self.calls:04d}"
        blocks: list = []
        if self.rng.random() < 0.15:
            blocks.append(Thinking(f"I should {self.rng.choice(VERBS)} the {self.rng.choice(NOUNS)} next."))
        if say:
            blocks.append(Text(say))
        blocks.append(ToolCall(cid, name, args))
        self.add("assistant", blocks)
        self.add("tool", [ToolResult(cid, output, is_error, exit_code)])


def _fmt(template: str, rng: random.Random, module: str) -> str:
    return template.format(
        m=module,
        m2=rng.choice(MODULES),
        n=rng.choice(NOUNS),
        v=rng.choice(VERBS),
        p=f"src/{module}/{rng.choice(NOUNS)}.py",
    )


def _fix(b: _Builder, rng: random.Random, path: str) -> None:
    """An edit to ``path``: the fix attempt that precedes a retry."""
    v, n = rng.choice(VERBS), rng.choice(NOUNS)
    b.tool(
        "Edit",
        {"file_path": path, "old_string": f"return {n}", "new_string": f"return {v}({n})"},
        f"The file {path} has been updated successfully.",
        say=f"Fixing {path}.",
    )


# Shapes measured on ../shared/transcripts (79 sessions, 821 tool results, 140 user turns) with
# `evalkit synth --compare`; the generator aims at them, the comparison checks them.
OUTPUT_MEDIAN, OUTPUT_SIGMA, OUTPUT_MAX = 450, 0.78, 60_000  # chars; sigma in decades; real max 58,050
KINDS = ("shell", "other", "edit", "read")
KIND_WEIGHTS = (0.43, 0.28, 0.15, 0.14)  # real: 352 shell, 228 other, 123 edit/write, 118 read
USER_TURN_RATE = 0.07  # a user turn per ~14 steps
PASTE_SHARE = 0.3  # real: 31% of user turns carry pasted material
# Seed situations the real sample is too small to show (0 of 2,057 messages over 80,000 chars, 0 of
# 140 user turns over 50 KiB: consistent with rates up to ~0.15% / ~2% at 95%). Rates are per session.
# Seed 004: one assistant message too large for keep-recent (a generated fixture written in one call)
# pins the kept tail, so compaction cannot shrink the context and fires again on the same range.
# A tool *output* cannot do that: the keep-recent cut snaps forward past it to an assistant message.
GIANT_OUTPUT_SHARE, GIANT_CHARS = 0.1, (700_000, 900_000)
OVERSIZED_PASTE_SHARE = 0.1  # seed 003: one 50-65 KiB paste
RESUMED_SHARE = 0.04  # real: 3 of 79


REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
    "tell you how to proceed."
)


def _user_turn(b: _Builder, rng: random.Random, module: str, pending: list[str], fmt) -> None:
    lines = [fmt(rng.choice(FOLLOWUPS))]
    if pending and rng.random() < 0.35:
        lines.append(pending.pop(0))
    if rng.random() < PASTE_SHARE:
        size = _lognormal(rng, 2_400, 0.25, 300, 12_000)
        body = _code(rng, module, size, b.code_pool) if rng.random() < 0.5 else _text_of(rng, b.pool, size)
        lines.append(rng.choice(PASTE_INTROS) + "\n```\n" + body + "```")
    b.add("user", [Text("\n".join(lines))])


def generate_session(seed: int, index: int, tokens: int = 0) -> Session:
    """Session ``index`` of the corpus with ``seed``; deterministic.

    ``tokens`` (chars/4) stops the session at about that size instead of the rounds planned for
    the default 200K window: the same content, drawn the same way, only shorter (tests with a
    small window need a few rounds, not the ~3,000 messages a real-shaped session has)."""
    h = int(hashlib.sha256(f"{seed}:{index}".encode()).hexdigest()[:16], 16)
    rng = random.Random(h)
    sid = f"synth-{seed}-{index:05d}"
    module = rng.choice(MODULES)
    b = _Builder(sid, rng, module=module)
    b.pool = _lines_pool(rng, module)
    code_pool = b.code_pool = _functions(rng, module)
    rounds = rng.randint(2, 6)
    target = _TRIGGER + (rounds - 1) * _ROUND + rng.randint(15_000, 50_000)
    target = tokens or target

    def fmt(t: str) -> str:
        return _fmt(t, rng, module)

    b.add("system", [Text("You are a coding agent working in /workspace/proj. Use the tools to act.")])
    constraints = [fmt(c) for c in rng.sample(CONSTRAINTS, rng.randint(3, 7))]
    resumed = rng.random() < RESUMED_SHARE
    first = fmt(rng.choice(RESUME_OPENERS)) + " " if resumed else ""
    first += fmt(rng.choice(TASKS))
    n_first = rng.randint(1, 2)
    b.add("user", [Text(first + "\n\n" + "\n".join(constraints[:n_first]))])
    pending = constraints[n_first:]

    # The texts a carry plugin keeps (seed 002): read once, early.
    project_md = (
        f"# PROJECT.md\n\nService: {module}-svc\nOwner: platform team\nEntry point: src/{module}/main.py\n"
        f"Test command: pytest -q tests/test_{module}.py\nDeploy: make release (never on Fridays)\n"
    )
    memory_md = (
        f"# MEMORY.md\n\n- {rng.choice(NOUNS)} ids are ULIDs, not UUIDs\n- the staging DB is read-only\n"
        f"- last release: v{rng.randint(1, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}\n"
    )
    b.tool("Read", {"file_path": "PROJECT.md"}, project_md, say="Let me read the project notes first.")
    b.tool("Read", {"file_path": "MEMORY.md"}, memory_md)

    test_cmd = f"pytest -q tests/test_{module}.py"
    failing: list[tuple[str, str, int, str]] = []  # open build failures: cmd, output, exit, file named
    last_fail_src = ""
    failed_tests = rng.randint(1, 6)
    files = [f"src/{module}/{n}.py" for n in rng.sample(NOUNS, 6)]
    hot = files[:2]  # failing tests point into these, and most edits go there
    giant_at = rng.uniform(_TRIGGER * 0.5, target) if rng.random() < GIANT_OUTPUT_SHARE else None
    paste_at = rng.uniform(0, target) if rng.random() < OVERSIZED_PASTE_SHARE else None

    while b.tokens < target:
        if giant_at is not None and b.tokens >= giant_at:
            giant_at = None
            path = f"tests/fixtures/{module}_snapshot.txt"
            b.tool(
                "Write",
                {"file_path": path, "content": _text_of(rng, b.pool, rng.randint(*GIANT_CHARS))},
                f"File created successfully at: {path}",
                say="Writing the recorded snapshot as a fixture.",
            )
            continue
        if paste_at is not None and b.tokens >= paste_at:
            paste_at = None
            log = _text_of(rng, b.pool, rng.randint(51 * 1024, 65 * 1024))
            b.add("user", [Text("Here is the full CI log:\n```\n" + log + "```")])
            continue
        if rng.random() < USER_TURN_RATE:
            _user_turn(b, rng, module, pending, fmt)
            continue
        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
        length = _lognormal(rng, OUTPUT_MEDIAN, OUTPUT_SIGMA, 2, OUTPUT_MAX)
        r = rng.random()
        if kind == "read":
            path = rng.choice(files)
            if r < 0.017:
                b.tool("Read", {"file_path": path + ".bak"}, "File does not exist.", is_error=True)
            else:
                b.tool("Read", {"file_path": path}, _code(rng, module, length, code_pool))
        elif kind == "edit":
            path = rng.choice(hot) if rng.random() < 0.7 else rng.choice(files)
            v, n = rng.choice(VERBS), rng.choice(NOUNS)
            args = {
                "file_path": path,
                "old_string": f"def {v}_{n}(items):",
                "new_string": f"def {v}_{n}(items, *, limit=100):",
            }
            # Failing edits: real 19 of 61 failing calls (31%) are edits whose old text was not found
            # or that the harness refused; rejections by the user are 5 of 61.
            if r < 0.13:
                b.tool(
                    "Edit",
                    args,
                    "String to replace not found in file.\nString: " + args["old_string"],
                    is_error=True,
                )
            elif r < 0.16:
                b.tool("Edit", args, REJECTED, is_error=True)
                b.add("user", [Text(fmt(rng.choice(FOLLOWUPS)))])
            elif r < 0.313:
                tpath = f"tests/test_{module}_{rng.choice(NOUNS)}.py"
                b.tool(
                    "Write",
                    {"file_path": tpath, "content": _code(rng, module, length, code_pool)},
                    f"File created successfully at: {tpath}",
                )
            else:
                b.tool(
                    "Edit", args, f"The file {path} has been updated successfully.", say=f"Fixing `{v}_{n}`."
                )
                failed_tests = max(0, failed_tests - rng.randint(0, 2))
        elif kind == "other":
            tool = rng.choice(["Grep", "Glob", "TodoWrite", "WebFetch"])
            if r < 0.022:
                b.tool(
                    tool,
                    {"pattern": rng.choice(NOUNS)},
                    f"Error: {tool} failed: request timed out after 30s",
                    is_error=True,
                )
            else:
                b.tool(
                    tool,
                    {"pattern": rng.choice(NOUNS), "path": f"src/{module}"},
                    _text_of(rng, b.pool, length),
                )
        elif r < 0.12:
            if last_fail_src and rng.random() < 0.8:
                _fix(b, rng, last_fail_src)
                failed_tests = max(0, failed_tests - rng.randint(0, 2))
            passed = rng.randint(20, 180)
            shape = rng.random()
            if shape < 0.33:  # short output, tally well inside 2,000 chars
                failed, late, cmd = min(failed_tests, 1), False, test_cmd
            elif shape < 0.95:  # long, tally late (real: 14 of 16 long test outputs)
                failed, late, cmd = max(failed_tests, 1) if rng.random() < 0.6 else 0, True, test_cmd
            else:  # long, tally early: tests, then a long type-check report
                failed, late, cmd = min(failed_tests, 1), False, "make check"
            src = rng.choice(hot)
            out = _pytest_output(rng, module, passed, failed, late, src)
            last_fail_src = src if failed else ""
            if cmd == "make check":
                out += _lint_tail(rng, module)
            b.tool(
                "Bash",
                {"command": cmd, "description": "Run the tests"},
                out,
                exit_code=int(failed > 0),
                is_error=failed > 0,
                say="Running the tests.",
            )
        elif r < 0.15:
            if failing and rng.random() < 0.7:
                cmd, text, code, named = failing.pop(0)
                if rng.random() < 0.75:
                    _fix(b, rng, named)
                    b.tool("Bash", {"command": cmd}, "done\n", exit_code=0, say="Retrying after the fix.")
                else:
                    b.tool("Bash", {"command": cmd}, text, exit_code=code, is_error=True)
                    failing.append((cmd, text, code, named))
            else:
                tmpl = rng.choice(_BUILD_ERRORS)
                n = rng.choice(NOUNS)
                cmd = tmpl[0].format(n=n)
                text = tmpl[1].format(m=module, n=n, N=n.capitalize(), k=rng.randint(10, 300))
                failing.append((cmd, text, tmpl[2], tmpl[3].format(m=module, n=n)))
                b.tool("Bash", {"command": cmd}, text, exit_code=tmpl[2], is_error=True)
        elif r < 0.155:
            b.tool(
                "Bash",
                {"command": f"{rng.choice(VERBS)}-{rng.choice(NOUNS)} --all"},
                f"bash: {rng.choice(VERBS)}-tool: command not found\n",
                exit_code=127,
                is_error=True,
            )
        else:
            cmd = rng.choice(
                [
                    "git diff --stat",
                    "git status --short",
                    f"grep -rn {rng.choice(NOUNS)} src/{module}",
                    f"ls src/{module}",
                    "git log --oneline -20",
                ]
            )
            b.tool("Bash", {"command": cmd}, _text_of(rng, b.pool, length), exit_code=0)
    if pending:
        b.add("user", [Text("One more thing:\n" + "\n".join(pending))])
        b.tool("Bash", {"command": test_cmd}, _pytest_output(rng, module, 120, 0, late=False), exit_code=0)
    b.add("assistant", [Text("All requested changes are in place and the tests pass.")])

    return Session(
        id=sid,
        source=Source(format="synthetic", path="", origin=f"evalkit.corpus.synth seed={seed} index={index}"),
        messages=b.messages,
        meta={
            "synthetic": True,
            "seed": seed,
            "index": index,
            "planned_rounds": rounds,
            "carry_files": ["PROJECT.md", "MEMORY.md"],
            "module": module,
            "resumed": resumed,
            # What the generator planted, for checking the facts extracted from it.
            "planted": {"constraints": constraints},
        },
    )


def generate(seed: int, sessions: int, start: int = 0, tokens: int = 0):
    """Yield sessions ``start`` .. ``start + sessions - 1`` of the corpus with ``seed``
    (``tokens``: see :func:`generate_session`)."""
    for i in range(start, start + sessions):
        yield generate_session(seed, i, tokens)
