"""Did a tool call fail, and which later call counts as the same attempt made again?

A call fails when its result says so in any of the ways real harnesses record it: a non-zero
exit code, the harness's error flag (``is_error``, an error status), an editor or patch tool's
refusal ("ERROR:", ``<tool_use_error>``, "No replacement was performed", "apply_patch
verification failed"), a call the user rejected, and, where the format records no exit code
(aider, SWE-agent), a test run whose tally shows failures or a command that died with a
traceback, a call the harness killed for running too long, and one it recorded as cut off by an
interruption before it completed (not a completion or question to the user). A search that found nothing
(``grep`` exit 1 with no output) did not fail, and a command still running (Codex's "Process
running with session ID N") has not failed yet: the poll that reports its exit says how it went.
"""

from __future__ import annotations

import json
import re
import shlex

from evalkit.contracts.session import ToolCall, ToolResult
from evalkit.facts.commands import _path_arg, command_of, normalize_command
from evalkit.facts.tallies import Tally

# Searches and comparisons whose exit status 1 means "no match" / "differs", not an error.
_NO_MATCH_TOOLS = {"grep", "egrep", "fgrep", "rg", "ag", "ack", "diff", "cmp", "test", "[", "git"}
# Harness trailers that are not the command's own output.
_TRAILER = re.compile(r"^\s*\[(?:The command completed with exit code \d+\.?|Command finished.*)\]\s*$", re.M)
# How tools and harnesses word a refused or failed call at the start of the result.
_REFUSAL_START = re.compile(
    r"^\s*(?:ERROR:|Error:|<tool_use_error>|error: |Failed to (?:apply|edit|find|write|read|replace)|"
    r"No replacement was performed|Your proposed edit has introduced new syntax error|"
    r"The user doesn'?t want to (?:proceed|take this action)|User rejected|"
    r"exec command rejected|Permission denied|Invalid `?path`? parameter|"
    # A permission layer that names itself ("Browser Use rejected this action due to browser
    # security policy. Reason: …"), and a CTF harness refusing a submitted answer.
    r"[\w ]{1,40} rejected this (?:action|request|command|call)\b|Wrong flag!|"
    # Roo's and Bob's refused diff, and an ignore file's block (.clineignore, .rooignore, .bobignore).
    r"<error_details>|Access to .{1,500}? is blocked by the \.\w+ file settings)",
    re.I,
)
# Said anywhere in the result's head (lower-cased substrings: most results are long and fine).
_REFUSAL_ANYWHERE = (
    "apply_patch verification failed",
    "rejected by user",
    "no match found for",
    "no matches found for the search",
    "did not appear verbatim in",
    "searchreplacenoexactmatch",
    "failed to match!",
)


# Codex frames a tool's output with its own header ("Chunk ID: …", "Wall time: … seconds",
# "Process exited with code N", "Output:"), and a JS/browser tool's output is a JSON list of
# content parts: the tool's own words are what is under the header, as text.
_HARNESS_HEADER = re.compile(
    r"^(?:Exit code:? -?\d+|Chunk ID: \S+|Wall time: .*|Process (?:exited with code -?\d+|running with session ID \d+)|"
    r"Original token count: \d+|Output:|Total output lines: \d+)\s*$"
)


def result_body(output: str) -> str:
    """A tool result's own text: without a harness's header lines, and a JSON list of content
    parts (``[{"type": "text", "text": …}]``) read as its text."""
    lines = output.splitlines()
    k = 0
    while k < len(lines) and (not lines[k].strip() or _HARNESS_HEADER.match(lines[k].strip())):
        k += 1
    body = "\n".join(lines[k:]).strip() if k else output
    if body.startswith('[{"type"'):
        try:
            parts = json.loads(body)
        except ValueError:
            return body
        if isinstance(parts, list) and all(isinstance(p, dict) for p in parts):
            return "\n".join(str(p["text"]) for p in parts if isinstance(p.get("text"), str))
    return body


def refusal_line(output: str) -> str | None:
    """The line in which a tool or harness refused the call, when the output opens with one
    (after an "ERROR:" header line, the message under it)."""
    output = result_body(output)
    if not _REFUSAL_START.match(output):
        return None
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    if lines and lines[0].rstrip(":").upper() == "ERROR" and len(lines) > 1:
        return lines[1]
    return lines[0] if lines else None


_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.M)
_NOT_FOUND = re.compile(r"^(?:\S+: )?(?:line \d+: )?\S+: (?:command )?not found\s*$", re.M)
# PowerShell's uncaught error record ends with its "+ FullyQualifiedErrorId : …" line (a command not
# found, a parse error such as "The token '&&' is not a valid statement separator …").
_PS_ERROR_END = re.compile(r"^[ \t]*\+ FullyQualifiedErrorId[ \t]+: \S+\s*\Z", re.M)


def _first_word(cmd: str) -> str:
    last = re.split(r"\|\||&&|;", cmd)[-1].strip()
    try:
        parts = shlex.split(last)
    except ValueError:
        parts = last.split()
    while parts and "=" in parts[0] and not parts[0].startswith("-"):
        parts = parts[1:]  # VAR=value prefixes
    return parts[0].rsplit("/", 1)[-1] if parts else ""


def own_output(output: str) -> str:
    """The command's output without the harness's trailers and prompts."""
    text = _TRAILER.sub("", output)
    text = re.sub(
        r"^\((?:Open file|Current directory|Interactive session): .*\)\s*$|^bash-\$\s*$", "", text, flags=re.M
    )
    return text.strip()


_REJECTED = re.compile(
    r"^\s*(?:The user doesn'?t want to|User rejected|The user denied this operation|exec command rejected|"
    r"[\w ]{1,40} rejected this (?:action|request|command|call) due to [\w ]{0,40}polic(?:y|ies))"
    r"|rejected by user|declined by user",
    re.I,
)


# A harness's record that the call was cut off before it completed: Cline's "Task was interrupted
# before this tool call could be completed.", Claude Code's "[Request interrupted by user…]" as the
# result, and the result the Codex importer writes for a ``turn_aborted`` ("[aborted: …]"). The
# call did not do what it was asked: a failure of its own class. (A call with no recorded result
# at all, the export ending or the session killed first, is no failure: ``missing_result``.)
_INTERRUPTED = re.compile(
    r"^\s*(?:Task was interrupted before this tool call could be completed\b|\[Request interrupted by user\b|"
    r"\[aborted: )"
)
# Tools that hand the turn to the user (finish, ask, present a plan): when the task is interrupted
# there, the user's next message answers them, as feedback does, so nothing failed.
_TO_THE_USER = {"attempt_completion", "ask_followup_question", "plan_mode_respond"}


def interrupted(res: ToolResult) -> bool:
    """Whether the harness recorded the call as cut off before it completed (``_INTERRUPTED``)."""
    return bool(_INTERRUPTED.match(res.output))


def never_returned(call: ToolCall | None, res: ToolResult) -> bool:
    """A call that hands the turn to the user, cut off by an interruption: the user's next turn
    answers it, so it neither failed nor succeeded (and fixes no earlier attempt)."""
    return call is not None and call.name in _TO_THE_USER and interrupted(res)


# A harness tool that answers in its own name that it failed ("write_stdin failed: stdin is closed
# for this session …"): the whole result, with no command output header above it.
_TOOL_FAILED = re.compile(r"^\s*[a-z]+_[a-z_]+ failed: ")
# The harness killed a call that ran too long: SWE-agent's "EXECUTION TIMED OUT", its later
# "The command '…' was cancelled because it took more than N seconds", mini-swe-agent's "The last
# command … timed out and has been killed". (OpenHands' "no new output after 30 seconds" is a
# command still running, not one killed.)
_TIMED_OUT = re.compile(
    r"^\s*(?:EXECUTION TIMED OUT\b|The command .{0,500}? was cancelled because it took more than \d+ seconds|"
    r"The last command .{0,500}? timed out and has been killed)",
    re.S,
)


def timeout_notice(output: str) -> str | None:
    """The harness's notice that it killed the call for time: the output opens with it, or it
    ends the output after what the command printed before it went quiet (SWE-agent's "EXECUTION
    TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 60.0 SECONDS." and its "PLEASE REFINE
    …" line under it). The same words inside the output, with the command's lines after them (a
    log being shown), are not the harness's."""
    own = own_output(output)
    if _TIMED_OUT.match(own):
        return own.lstrip().splitlines()[0].strip()
    for line in own.splitlines()[-2:]:
        if _TIMED_OUT.match(line):
            return line.strip()
    return None


# Codex runs a command that outlives its first result in the background: that result says
# "Process running with session ID N", and a later ``write_stdin`` poll of session N reports
# "Process exited with code N" with the output. The command's failure is read on that poll.
_RUNNING = re.compile(r"^Process running with session ID (\d+)\s*$", re.M)


def running_session(output: str) -> str | None:
    """The background session id when this result was recorded while its command still ran."""
    head = output[:300]
    m = _RUNNING.search(head) if "Process running" in head else None
    return m.group(1) if m else None


class Polls:
    """Which command a poll reports on: a call with no command of its own whose ``session_id``
    names a command still running (Codex's ``write_stdin``) stands for that command, so the
    no-match rule, the error string and ``fixed`` read the polled command."""

    def __init__(self) -> None:
        self.running: dict[str, ToolCall] = {}

    def note(self, call: ToolCall | None, res: ToolResult) -> None:
        sid = running_session(res.output)
        if sid and call is not None:
            self.running[sid] = self.subject(call)

    def subject(self, call: ToolCall | None) -> ToolCall | None:
        """The call whose command ``call``'s result reports on (``call`` itself unless it polls)."""
        if call is None or command_of(call) is not None or "session_id" not in call.args:
            return call
        return self.running.get(str(call.args["session_id"]), call)


def failure_source(call: ToolCall | None, res: ToolResult, tally: Tally | None) -> str | None:
    """How the result ``res`` says its call failed (one of ``extract.SOURCES["failures"]``), or
    None when it did not fail (see the module docstring). ``call`` is the call the result
    reports on (for a poll, the polled command: :class:`Polls`)."""
    if running_session(res.output):
        return None  # the command had not ended: the poll that reports its exit says how it went
    cmd = command_of(call) if call else None
    out = result_body(res.output)
    if res.exit_code not in (None, 0):
        no_match = res.exit_code == 1 and cmd and _first_word(cmd) in _NO_MATCH_TOOLS
        return None if (no_match and not own_output(out)) else "exit code"
    if interrupted(res):
        return None if never_returned(call, res) else "interrupted"
    head = out[:2000]
    low = head.lower()
    if ("reject" in low or "denied" in low or "want to" in low or "declined" in low) and _REJECTED.search(
        head
    ):
        return "rejection"
    if res.is_error:
        return "error flag"
    if _REFUSAL_START.match(out) or (res.exit_code is None and _TOOL_FAILED.match(res.output)):
        return "refusal"
    if timeout_notice(out):
        return "timeout"
    if any(n in out[:4000].lower() for n in _REFUSAL_ANYWHERE):
        return "refusal"
    if res.exit_code is None and tally is not None and (tally.failed or tally.errors):
        return "test tally"
    if res.exit_code is None and cmd and ("Traceback (most recent call last):" in out or "not found" in out):
        own = own_output(out)
        if _TRACEBACK.search(own) or _NOT_FOUND.search(own):
            return "crash"
    if (
        res.exit_code is None
        and cmd
        and "FullyQualifiedErrorId" in out
        and _PS_ERROR_END.search(own_output(out))
    ):
        return "crash"
    return None


def call_failed(call: ToolCall | None, res: ToolResult, tally: Tally | None) -> bool:
    """Whether the call ``res`` answers failed (see the module docstring)."""
    return failure_source(call, res, tally) is not None


# A harness that lints right after an edit and shows the model what it found: Cline appends
# "New problems detected after saving the file:" with the problems per file; aider sends
# "# Fix any errors below" with its linter's report. Only an error in the edited file fails the
# edit (a workspace-wide list names other files too; warnings alone do not fail it).
_CLINE_PROBLEMS = "New problems detected after saving the file:"
# Roo and Bob close the list with "</problems>" on its last line.
_CLINE_ERROR = re.compile(r"^- (\[[^\]]*\bError\] .+?)(?:</problems>)?\s*$", re.M)
# flake8 "a.py:3:1: F401 'os' imported but unused", pylint "a.py:3:0: W0611: Unused import re".
_LINT_DIAGNOSTIC = re.compile(r"^(\S+?:\d+:\d+: [A-Z]+\d+:? .+?)\s*$", re.M)
# The file each lint run checked: "## Running: pylint README.md", and a diagnostic's own path.
_LINT_RUNNING = re.compile(r"^## Running: \S+(?: -\S+)* (\S+)\s*$", re.M)
# The file line over the marked source lines ("README.md:" then "3█…").
_LINT_LISTED = re.compile(r"^([^\s:│█]+):\s*\n(?:\.\.\.⋮\.\.\.\s*\n)?\s*\d+[│█]", re.M)


def edit_lint_error(call: ToolCall | None, output: str) -> str | None:
    """The first error a harness's automatic lint reported in the file this edit wrote."""
    if call is None or _CLINE_PROBLEMS not in output:
        return None
    target = _path_arg(call.args)
    body = output.split(_CLINE_PROBLEMS, 1)[1]
    for section in re.split(r"\n\s*\n(?=\S)", body.strip()):
        lines = section.strip().splitlines()
        if lines and target and lines[0].strip() == target:
            m = _CLINE_ERROR.search(section)
            if m:
                return m.group(1).strip()
    return None


def lint_report_paths(report: str) -> set[str]:
    """The files aider's lint report names (the linted paths and its diagnostics' paths)."""
    paths = set(_LINT_RUNNING.findall(report)) | set(_LINT_LISTED.findall(report))
    paths.update(m.group(1).split(":", 1)[0] for m in _LINT_DIAGNOSTIC.finditer(report))
    return paths


def lint_report_error(report: str, path: str | None = None) -> str | None:
    """The first diagnostic of aider's lint report (``path:line:col: CODE message``), the first
    for ``path`` when given."""
    found = [m.group(1) for m in _LINT_DIAGNOSTIC.finditer(report)]
    own = [d for d in found if path and d.startswith(f"{path}:")]
    if own or found:
        return (own or found)[0]
    for ln in report.splitlines():
        if re.search(r"\berror\b", ln, re.I) and not ln.lstrip().startswith("#"):
            return ln.strip()
    return None


_FLAG = re.compile(r"^-")
_PREPARE = re.compile(
    r"^(?:(?:source\s+|\.\s+)?\S*activate(?:\.ps1|\.bat|\.fish)?|sleep\s+\S+|"
    r"timeout\s+/t\s+\d+(?:\s+/nobreak)?(?:\s*>\s*nul)?|start-sleep(?:\s+-\w+)?\s+\S+)\s*(?:;|&&|&)\s*",
    re.I,
)
_AS_MODULE = re.compile(r"(?:^|(?<=\s))\S*python(?:3(?:\.\d+)?)?(?:\.exe)?\s+-m\s+", re.I)


def attempt_key(call: ToolCall | None) -> str:
    """What makes two calls the same attempt: a shell command without its flags, pipes into
    pagers and redirections (``pytest tests/x.py --tb=short`` ~ ``pytest tests/x.py``); another
    tool's name and target (``Edit a.py`` ~ ``Edit a.py``)."""
    if call is None:
        return ""
    cmd = command_of(call)
    if cmd is None:
        # An MCP call's target is the server's tool it calls, whatever its arguments.
        mcp = " ".join(
            str(call.args[k]) for k in ("server_name", "tool_name") if isinstance(call.args.get(k), str)
        )
        texts = (v for k, v in sorted(call.args.items()) if isinstance(v, str) and k != "thought")
        target = _path_arg(call.args) or mcp or next(texts, "")
        # An editor's sub-command is part of the attempt: viewing a file does not fix a failed edit.
        sub = call.args.get("command") if isinstance(call.args.get("command"), str) else ""
        return " ".join(x for x in (call.name.lower(), sub.lower(), target) if x)
    norm = normalize_command(cmd)
    # Steps that only prepare the run come off the front (a virtualenv's activation, a wait:
    # ".venv\\Scripts\\Activate.ps1; python -m x", "Start-Sleep -Seconds 5; docker-compose logs"),
    # and a tool run as its interpreter's module is that tool (".venv/bin/python -m pytest x").
    while (stripped := _PREPARE.sub("", norm, count=1)) != norm:
        norm = stripped
    norm = _AS_MODULE.sub("", norm)
    # "| head -50", "| tail", "2>&1", "|| true" change what is shown, not what runs.
    norm = re.sub(r"\s*(?:\|\s*(?:head|tail|less|more|cat|tee)\b.*|\|\|\s*true\s*)$", "", norm)
    norm = re.sub(r"\s*\d?>&\d|\s*2>\s*/dev/null", "", norm)
    # The same commands in the same order, joined with ";" where "&&" failed (PowerShell 5 has no
    # "&&": "git checkout a && git pull" is re-run as "git checkout a; git pull").
    norm = re.sub(r"\s*(?:&&|;)\s*", " ; ", norm)
    try:
        words = shlex.split(norm)
    except ValueError:
        words = norm.split()
    return " ".join(w for w in words if not _FLAG.match(w))
