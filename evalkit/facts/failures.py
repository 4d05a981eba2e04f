"""Did a tool call fail, and which later call counts as the same attempt made again?

A call fails when its result says so in any of the ways real harnesses record it: a non-zero
exit code, the harness's error flag (``is_error``, an error status), an editor or patch tool's
refusal ("ERROR:", ``<tool_use_error>``, "No replacement was performed", "apply_patch
verification failed"), a call the user rejected, and, where the format records no exit code
(aider, SWE-agent), a test run whose tally shows failures or a command that died with a
traceback. A search that found nothing (``grep`` exit 1 with no output) did not fail.
"""

from __future__ import annotations

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
    r"exec command rejected|Permission denied|Invalid `?path`? parameter)",
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


def refusal_line(output: str) -> str | None:
    """The line in which a tool or harness refused the call, when the output opens with one
    (after an "ERROR:" header line, the message under it)."""
    if not _REFUSAL_START.match(output):
        return None
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    if lines and lines[0].rstrip(":").upper() == "ERROR" and len(lines) > 1:
        return lines[1]
    return lines[0] if lines else None


_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.M)
_NOT_FOUND = re.compile(r"^(?:\S+: )?(?:line \d+: )?\S+: (?:command )?not found\s*$", re.M)


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
    text = re.sub(r"^\(Open file: .*\)\s*$|^\(Current directory: .*\)\s*$|^bash-\$\s*$", "", text, flags=re.M)
    return text.strip()


def call_failed(call: ToolCall | None, res: ToolResult, tally: Tally | None) -> bool:
    """Whether the call ``res`` answers failed (see the module docstring)."""
    cmd = command_of(call) if call else None
    if res.exit_code not in (None, 0):
        no_match = res.exit_code == 1 and cmd and _first_word(cmd) in _NO_MATCH_TOOLS
        return not (no_match and not own_output(res.output))
    if res.is_error:
        return True
    out = res.output
    if _REFUSAL_START.match(out):
        return True
    head = out[:4000].lower()
    if any(n in head for n in _REFUSAL_ANYWHERE):
        return True
    if res.exit_code is None and tally is not None and (tally.failed or tally.errors):
        return True
    if res.exit_code is None and cmd and ("Traceback (most recent call last):" in out or "not found" in out):
        own = own_output(out)
        return bool(_TRACEBACK.search(own) or _NOT_FOUND.search(own))
    return False


_FLAG = re.compile(r"^-")


def attempt_key(call: ToolCall | None) -> str:
    """What makes two calls the same attempt: a shell command without its flags, pipes into
    pagers and redirections (``pytest tests/x.py --tb=short`` ~ ``pytest tests/x.py``); another
    tool's name and target (``Edit a.py`` ~ ``Edit a.py``)."""
    if call is None:
        return ""
    cmd = command_of(call)
    if cmd is None:
        target = _path_arg(call.args) or next(
            (str(v) for k, v in sorted(call.args.items()) if isinstance(v, str) and k not in ("thought",)), ""
        )
        # An editor's sub-command is part of the attempt: viewing a file does not fix a failed edit.
        sub = call.args.get("command") if isinstance(call.args.get("command"), str) else ""
        return " ".join(x for x in (call.name.lower(), sub.lower(), target) if x)
    norm = normalize_command(cmd)
    # "| head -50", "| tail", "2>&1", "|| true" change what is shown, not what runs.
    norm = re.sub(r"\s*(?:\|\s*(?:head|tail|less|more|cat|tee)\b.*|\|\|\s*true\s*)$", "", norm)
    norm = re.sub(r"\s*\d?>&\d|\s*2>\s*/dev/null", "", norm)
    try:
        words = shlex.split(norm)
    except ValueError:
        words = norm.split()
    return " ".join(w for w in words if not _FLAG.match(w))
