"""Aider chat history Markdown (``.aider.chat.history.md``).

One session per ``# aider chat started at`` header. ``#### `` lines are user input (consecutive
ones form one message); ``/run``, ``/test`` and ``!cmd`` as the whole input (not a pasted line
that happens to open with "!") become a bash call (in an assistant message marked synthetic,
since the user, not the model, ran it) answered by the pasted output.
Other slash commands are synthetic user text. Lines starting with ``> `` are aider's own status
output (token counts, commits, the echo of command output) and are skipped, except:

- ``> Applied edit to PATH``: aider applied the model's edit block; it becomes a synthetic
  ``edit`` call on PATH answered by that line, so files modified are known; ``> Skipping edits
  to PATH`` and "SEARCH/REPLACE block failed to match" become the same call answered as an error
  (the latter on the file its report names, the report being the result: aider 0.86 prefixes only
  the report's first line, so its unprefixed lines up to the Markdown line break belong to it);
- ``> # Fix any errors below, if possible.`` and the lint report under it: aider sends that to
  the model, so it is kept as synthetic user text (one message per run of reports, aider linting
  each file it wrote in turn; its status lines after them, "Attempt to fix lint errors?", are not
  part of it);
- ``> Commit 1a2b3c4 …``: aider committed the applied edits; the line is appended to the result
  of the latest edit aider answered (the commit's SHA is an anchor a continuation needs);
- ``>>>>>>> REPLACE``: the end of an edit block, part of the assistant's text;
- ``> Unable to write file X after N attempts: [Errno …]``: aider could not write the edit: the
  same ``edit`` call on X (as the model's edit block spells it) answered by that line as an error;
- the shell commands aider offers from the model's reply (the commands, the first line prefixed,
  then ``> Run shell command(s)? … : y|n``): answered yes, each ``> Running <cmd>`` becomes a
  ``bash`` call with an empty result (aider prints the output to the terminal, not the history);
  declined, each offered command becomes a ``bash`` call answered as declined by the user. A
  multi-line status message's unprefixed lines are aider's, not the model's text.

A ``(y/n…)`` line is aider's prompt followed by the user's reply, filed as user text. The rest is
assistant text. Aider writes no exit codes and no compaction records.
"""

from __future__ import annotations

import re
from dataclasses import replace

from evalkit.contracts.session import Text, ToolCall, ToolResult
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, short_id
from evalkit.importers.inputs import ImportReport, Probe, decode_reported

HEADER = re.compile(r"^# aider chat started at (.+?)\s*$")
GENUINE_COMMANDS = ("/ask", "/code", "/architect")


YES_NO = re.compile(r"^[(\[](?:y/n|Y/n|y/N)[^)\]]*[)\]]\s*(.*?)\s*$")
APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
# Edits aider did not apply: the user declined a new file, or a SEARCH block matched nothing.
NOT_APPLIED = re.compile(r"^(?:Skipping edits to (.+?)|# \d+ SEARCH/REPLACE blocks? failed to match!.*)\s*$")
LINT_START = "# Fix any errors below"
# aider's status lines after a lint report: its prompt, its give-up notice, the next status.
LINT_END = re.compile(
    r"^(?:Attempt to fix lint errors\?|Only \d+ reflections allowed|summarizer unexpectedly failed|"
    r"Tokens: |Commit [0-9a-f]{7,40} |Applied edit to )"
)
# aider could not write an edit's file ("Unable to write file X after 5 attempts: [Errno 13] …"):
# a failed edit of X, the line its error.
UNWRITABLE = re.compile(r"^Unable to write file (.+?) after \d+ attempts?: ")
# aider offers the shell commands of the model's reply: the commands (its "subject", the first
# line prefixed, the others as written), then this prompt and the user's answer; for each command
# it runs, "Running <cmd>". The output goes to the terminal only, never into the history.
SHELL_PROMPT = re.compile(r"^Run shell commands?\? .*?(?::|[\])])\s*(\w*)\s*$")
RUNNING = re.compile(r"^Running (.+?)\s*$")
# aider's own status lines: never part of a command it offers.
STATUS = re.compile(
    r"^(?:Tokens: |Applied edit to |Commit [0-9a-f]{7,40} |Committing |Unable to write file |\[Errno \d+\]|"
    r"Added \d+ lines? of output|Add command output|Running |Run shell commands?\?|You can use /undo|"
    r"Skipping edits to |Repo-map: |Git repo: |Model: |Models: |Aider v)"
)
DECLINED = "[declined by user at aider's prompt: {}]"
# aider wraps its "> Tokens: …" status line; the wrapped half arrives without the "> " prefix.
COST_LINE = re.compile(r"^Cost: \$[\d.]+ (?:message|request)")


# "> Commit 1a2b3c4 feat: …": aider committed the edits it just applied.
COMMIT = re.compile(r"^Commit [0-9a-f]{7,40} ")
# A failed-match report names the file under its count line ("… failed to exactly match lines in X").
NO_MATCH_PATH = re.compile(r"failed to exactly match lines in (\S+?)\s*$", re.M)
# A failed-match report's note that the reply's other blocks did apply.
OTHERS_APPLIED = re.compile(r"The other (\d+) SEARCH/REPLACE blocks? (?:were|was) applied successfully")
# Status lines that end a failed-match report aider wrote all prefixed (before 0.86).
REPORT_END = re.compile(
    r"^(?:Commit [0-9a-f]{7,40} |Applied edit to |Skipping edits to |# Fix any errors|Tokens: )"
)


def _note_commit(b: SessionBuilder, line: str, pending: list[str], edits: list[int]) -> None:
    """Append aider's commit line to the result of the edit it committed (the latest edit aider
    answered, ``edits`` being the indices of those results), so the commit's SHA stays with the
    call that made the change; after a failed match the commit holds what aider did create (an
    empty new file). A commit of the user's own changes before the edits apply ("Committing X
    before applying edits.") waits for the next applied edit."""
    if pending and pending[-1] == "":
        pending[-1] = line
        return
    if edits:
        msg = b.messages[edits[-1]]
        res = msg.blocks[0]
        if isinstance(res, ToolResult):
            msg.blocks[0] = replace(res, output=f"{res.output}\n{line}")


def _relayed(b: SessionBuilder, text: str) -> dict | None:
    """A ``####`` turn the user did not type: aider logs ``/code <message>`` and then the message
    as sent (the words are the command's), and in architect mode the architect's reply it hands
    to the editor model."""
    prev = next((m for m in reversed(b.messages) if m.role in ("user", "assistant")), None)
    if prev is None or len(prev.blocks) != 1 or not isinstance(prev.blocks[0], Text):
        return None
    before = prev.blocks[0].text.strip()
    if (
        prev.role == "user"
        and before.split(maxsplit=1)[0] in GENUINE_COMMANDS
        and before.split(maxsplit=1)[1:] == [text.strip()]
    ):
        return {"harness": "aider command echo"}
    if prev.role == "assistant" and before == text.strip():
        return {"harness": "aider architect relay"}
    return None


def _applied_others(report: str, reply: str) -> list[tuple[str, str]]:
    """The files of the blocks a failed-match report says aider applied ("The other 2
    SEARCH/REPLACE blocks were applied successfully"): the reply's blocks without the failed ones,
    when their count agrees with the report's."""
    m = OTHERS_APPLIED.search(report)
    if not m:
        return []
    files: list[str] = []
    lines = reply.splitlines()
    for k, ln in enumerate(lines):
        if ln.startswith("<<<<<<< SEARCH"):
            name = next((x.strip() for x in reversed(lines[:k]) if x.strip() and not x.startswith("```")), "")
            files.append(name)
    for failed in NO_MATCH_PATH.findall(report):
        if failed in files:
            files.remove(failed)
    if len(files) != int(m.group(1)) or not all(files):
        return []
    return [(f, m.group(0) + ".") for f in dict.fromkeys(files)]


def _as_written(path: str, reply: str) -> str:
    """aider names a file it could not write by its absolute path; the edit block of the model's
    reply names it relative to the repository (the spelling of every other edit of that file)."""
    tails = [ln.strip() for ln in reply.splitlines() if ln.strip() and " " not in ln.strip()]
    tails = [t for t in tails if path.endswith("/" + t.lstrip("./"))]
    return max(tails, key=len).lstrip("./") if tails else path


def detect(probe: Probe) -> bool:
    # Real histories often start with pages of text from an earlier aider version's header-less
    # session, so the first header can sit far past the first lines.
    return any(HEADER.match(line) for line in probe.head_text.split("\n"))


def _lines(path, report: ImportReport):
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            yield n, decode_reported(raw, path, n, report).rstrip("\r\n")


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    stem = short_id(path.name.split(".")[0] or path.name)
    b: SessionBuilder | None = None
    user: list[str] = []
    user_line = 0
    assistant: list[str] = []
    assistant_line = 0
    output: list[str] | None = None  # collecting a /run or /test output
    lint: list[str] | None = None  # collecting a lint report shown to the model
    lint_line = 0
    command = ""
    count = 0
    pending_commits: list[str] = []  # commits aider made before applying the next edit
    edits: list[int] = []  # indices of the results aider gave edit calls
    no_match: list[str] | None = None  # collecting a failed-match report
    no_match_line = 0
    status: list[str] = []  # aider's status lines since the last text (a shell prompt's subject)
    held: list[tuple[int, str]] = []  # unprefixed lines right after a status line
    said = ""  # the model's latest reply: the commands aider offers come from it
    running = False  # the user let aider run the commands it offered
    after_status = False  # the previous line was one of aider's status lines

    def flush_user():
        nonlocal user
        if user and b is not None:
            text = "\n".join(user)
            cmd = text.split()[0] if text.startswith("/") else ""
            synthetic = bool(cmd) and cmd not in GENUINE_COMMANDS
            meta = _relayed(b, text)
            b.text("user", text, user_line, synthetic=synthetic or bool(meta), meta=meta)
        user = []

    def flush_assistant():
        nonlocal assistant, said
        text = "\n".join(assistant).strip("\n")
        if text.strip() and b is not None:
            b.text("assistant", text, assistant_line)
            said = text
        assistant = []

    def shell_call(command_text: str, n: int, output: str) -> None:
        """A shell command aider ran for the model (or the user declined): a call and its result."""
        cid = f"{b.session_id}:shell{len(b.messages)}"
        b.add("assistant", [ToolCall(cid, "bash", {"command": command_text})], n, {"harness": "aider shell"})
        b.result(cid, output, line=n)

    def offered() -> list[str]:
        """The commands of the prompt's subject: the status lines just before it that the model's
        reply holds (aider takes them from its fenced shell blocks)."""
        cmds: list[str] = []
        for ln in reversed(status):
            if not ln.strip() or STATUS.match(ln.strip()) or ln.strip() not in said:
                break
            cmds.insert(0, ln.strip())
        return [c for c in cmds if not c.startswith("#")]

    def flush_output():
        nonlocal output
        if output is not None and b is not None:
            cid = f"{b.session_id}:run{len(b.messages)}"
            b.add(
                "assistant",
                [ToolCall(cid, "bash", {"command": command})],
                user_line,
                {"synthetic": True, "harness": "aider /run"},
            )
            b.result(cid, "\n".join(output).rstrip(), line=user_line + 1)
        output = None

    def flush_lint():
        nonlocal lint
        if lint and b is not None:
            b.text("user", "\n".join(lint).strip(), lint_line, synthetic=True, meta={"harness": "aider lint"})
        lint = None

    def applied(path_text: str, n: int, status: str | None = None, note: str | None = None):
        """aider's application of an edit block: a synthetic edit call answered by its status
        (``status``: aider did not apply it; ``note``: aider's own words that it did)."""
        flush_assistant()
        cid = f"{b.session_id}:edit{len(b.messages)}"
        b.add(
            "assistant",
            [ToolCall(cid, "edit", {"path": path_text})],
            n,
            {"synthetic": True, "harness": "aider"},
        )
        output = status or note or f"Applied edit to {path_text}"
        if status is None and pending_commits:
            output = "\n".join([output, *(c for c in pending_commits if c)])
            pending_commits.clear()
        b.result(cid, output, is_error=status is not None, line=n)
        edits.append(len(b.messages) - 1)

    def flush_report():
        """A failed-match report: a failing edit of the file it names, answered by the report.
        aider 0.86 prefixes only its first line with "> "; earlier versions every line."""
        nonlocal no_match
        if no_match is not None:
            text = "\n".join(no_match).rstrip()
            m = NO_MATCH_PATH.search(text)
            applied(m.group(1) if m else "", no_match_line, status=text)
            for path_text, note in _applied_others(text, said):
                applied(path_text, no_match_line, note=note)
        no_match = None

    def finish():
        flush_report()
        flush_lint()
        flush_output()
        flush_user()
        flush_assistant()
        return b.finish() if b is not None else None

    for n, line in _lines(path, report):
        m = HEADER.match(line)
        if m:
            s = finish()
            if s:
                yield s
            count += 1
            b = SessionBuilder(report, "aider", path, f"{stem}:{count}", meta={"started": m.group(1)})
            continue
        if b is None:
            if line.strip():
                report.skip(path, n, "aider text before the first session header")
            continue
        if output is not None:
            if (not output and not line.startswith("> ")) or line.startswith("#### "):
                flush_output()  # no output printed, or the next input began
            else:
                # aider ends each appended block with a Markdown line break ("  "); a line of
                # only spaces inside pasted output is not that break.
                last = line.endswith("  ") and bool(line.strip())
                text = line[2:] if not output else line
                output.append(text.rstrip() if last else text)
                if last:
                    flush_output()
                continue
        if no_match is not None:
            prefixed = line.startswith(">") and not line.startswith(">>>>>>> ")  # a quoted block's end
            body = line[1:].strip() if prefixed else line
            unprefixed_seen = any(not r.startswith("\0") for r in no_match[1:])
            if line.startswith("#### ") or (prefixed and (unprefixed_seen or REPORT_END.match(body))):
                no_match = [r.lstrip("\0") for r in no_match]
                flush_report()
            else:
                # "\0" marks a prefixed line until the report ends (an unprefixed line after
                # prefixed ones is the next text, not the report).
                if prefixed:
                    no_match.append("\0" + body)
                    continue
                if no_match[1:] and no_match[-1].startswith("\0"):
                    no_match = [r.lstrip("\0") for r in no_match]
                    flush_report()
                else:
                    no_match.append(line.rstrip())
                    if line.endswith("  ") and line.strip():  # aider's Markdown break ends the message
                        flush_report()
                    continue
        if lint is not None:
            body = line[1:].strip() if line.startswith(">") else None
            if body is not None and not LINT_END.match(body):
                # aider's Markdown line break ("  ") is no part of the report
                lint.append((line[2:] if line.startswith("> ") else line[1:]).rstrip())
                continue
            flush_lint()
        prefixed = line.startswith(">") and not line.startswith(">>>>>>> ")
        if (
            not prefixed
            and (held or after_status)
            and line.strip()
            and not line.startswith("#### ")
            and not YES_NO.match(line)
            and not COST_LINE.match(line)
        ):
            held.append((n, line))  # a status message's further line, or the model's next text
            continue
        if held:
            if prefixed:  # aider prefixes only the first line of a multi-line status message
                status.extend(h for _, h in held)
            else:
                for hn, h in held:
                    if not assistant:
                        assistant_line = hn
                    assistant.append(h)
            held = []
        after_status = prefixed
        if line.strip() and not prefixed and not COST_LINE.match(line):
            status.clear()
            running = False
        if line.startswith("#### "):
            flush_assistant()
            text = line[5:].rstrip()
            # "!cmd" and "/run cmd" run a command only as the whole input, not as a pasted line
            shell = text.startswith("!") and len(text) > 1 and not user
            if shell or (
                not user and text.startswith(("/run", "/test")) and len(text.split(maxsplit=1)) == 2
            ):
                flush_user()
                user, user_line = [text], n
                flush_user()
                command = text[1:].strip() if shell else text.split(maxsplit=1)[1]
                output = []
                continue
            if not user:
                user_line = n
            user.append(text)
            continue
        flush_user()
        yn = YES_NO.match(line)
        if yn:
            flush_assistant()
            reply = yn.group(1)
            if reply:  # a bare y/n is an answer to aider, not an instruction to the model
                b.text("user", reply, n, synthetic=reply.lower() in ("y", "n", "yes", "no", "a", "d", "s"))
            continue
        if COST_LINE.match(line):
            flush_assistant()
            continue
        if line.startswith(">") and not line.startswith(">>>>>>> "):
            flush_assistant()
            body = line[1:].strip()
            m = SHELL_PROMPT.match(body)
            if m:
                cmds = offered()
                status.clear()
                running = m.group(1).lower() in ("", "y", "yes", "a", "all")
                if not running:  # declined (no, skip all, don't ask again): each offered command
                    for c in cmds:
                        shell_call(c, n, DECLINED.format(body))
                continue
            m = RUNNING.match(body) if running else None
            if m:
                shell_call(m.group(1), n, "")
                continue
            m = UNWRITABLE.match(body)
            if m:
                applied(_as_written(m.group(1), said), n, status=body)
                continue
            status.append(body)
            m = APPLIED.match(body)
            if m:
                applied(m.group(1), n)
                continue
            m = NOT_APPLIED.match(body)
            if m:
                if m.group(1):
                    applied(m.group(1), n, status=body)
                else:
                    no_match, no_match_line = [body], n
                continue
            if body.startswith(LINT_START):
                lint, lint_line = [body], n
                continue
            if COMMIT.match(body):
                _note_commit(b, body, pending_commits, edits)
                continue
            if body.startswith("Committing ") and body.endswith("before applying edits."):
                pending_commits.append("")  # the commit line that follows belongs to the next edit
                continue
            if body.startswith("Models:"):
                b.meta.setdefault("model", body[len("Models:") :].split(" with ")[0].strip())
            elif body.startswith("Aider v"):
                b.meta.setdefault("aider_version", body.split()[1])
            continue
        if not assistant:
            assistant_line = n
        assistant.append(line)
    s = finish()
    if s:
        yield s


IMPORTER = register(
    Importer(
        "aider",
        "Aider .aider.chat.history.md (one session per header; /run and /test output as tool results)",
        detect,
        read,
    )
)
