"""Identifiers: the specifics a session depends on, which compaction must not lose.

Kinds (``Identifier.kind``):

- ``pr``: a PR or issue number ("PR #12", "PR 12", "issue #40", "fixes #3", ``owner/repo#7``, a
  ``/pull/N`` URL), as "#N" ("Issue 1" of a list and "world's #1" are not);
- ``sha``: a commit SHA (7-40 hex digits with a digit and a letter) said by the user or agent;
- ``url``: an http(s) URL said by the user or agent or passed to a tool;
- ``branch``: a branch the agent created, switched to or pushed (``git checkout -b``, ``switch
  -c``, ``push origin X``, ``gh pr create --head X``);
- ``dir``: a directory the agent created (``mkdir``);
- ``symbol``: a function or class the agent defined or edited (a definition line in the new text
  of an edit: ``def``, ``class``, ``function``, ``const f = (…) =>``, ``fn``, ``func``);
- ``error``: the exact error string of a failing call (:func:`error_string`).

Sources are the user's and agent's own words and the agent's call arguments, not tool output:
a SHA in ``git log`` output is not one the session depends on until someone names it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

# A commit the harness made for the agent (aider's "Commit 1a2b3c4 feat: …" status line).
HARNESS_COMMIT = re.compile(r"^Commit ([0-9a-f]{7,40}) ", re.M)
_URL = re.compile(r"https?://[^\s<>\"'`)\]}|]+")
_PR = re.compile(
    r"(?:\b(?:PR|pull request)[ \t]*#?(\d{1,7})\b)"
    r"|(?:\b(?:issue|pull|fixes|closes|resolves|fix|close|resolve|see)[ \t]*#(\d{1,7})\b)"
    r"|(?:\b[\w.-]+/[\w.-]+#(\d{1,7})\b)"
    r"|(?:github\.com/[\w.-]+/[\w.-]+/(?:pull|issues)/(\d{1,7}))"
    r"|(?:\bgh (?:pr|issue) (?:view|checkout|merge|close|comment|edit|diff|review) #?(\d{1,7})\b)",
    re.I,
)
# A list after one keyword names each number: "issues #32934 and #26930", "PRs #1, #2 and #3".
_PR_LIST = re.compile(
    r"\b(?:issues?|PRs?|pull requests?)\s+#\d{1,7}(?:(?:\s*,\s*|\s+(?:and|or)\s+|\s*&\s*)#\d{1,7}\b)+", re.I
)
_SHA = re.compile(r"(?<![\w#/.-])([0-9a-f]{7,40})(?![\w-])")
# git's global options before the subcommand ("git -C <worktree> checkout -b X") leave it the same
# command; a worktree added with its own branch ("git worktree add ../wt -b X") creates that branch.
_GIT = r"\bgit\s+(?:(?:-C|-c|--git-dir|--work-tree)(?:\s+|=)\S+\s+)*"
_BRANCH = re.compile(
    rf"{_GIT}(?:checkout\s+-[bB]|switch\s+-[cC]|branch(?:\s+-[mM])?|worktree\s+add\b[^;&|\n]*?\s-[bB])\s+([\w./-]+)"
    rf"|{_GIT}push\s+(?:-\S+\s+)*[\w.-]+\s+(?:HEAD:)?([\w./-]+)"
    r"|\bgh\s+pr\s+create\b[^\n]*?--head\s+([\w./-]+)"
)
# A flag holds no "/": "mkdir -p -experiments/worktrees/work" (a publisher's path that opens with
# "-") creates that path.
_MKDIR = re.compile(r"(?:^|[;&|(]\s*|\s)mkdir\s+((?:-[^\s/]+\s+)*)([^;&|<>\n]+)")
# C#/Java/TypeScript modifiers before the keyword ("public class ItemData", "export abstract class").
_MODIFIERS = r"(?:(?:public|private|protected|internal|static|abstract|sealed|partial|final)\s+)*"
# A TypeScript interface or type alias declares a shape, no behaviour: not a definition line by the
# labelling rules' keyword list (heldout39, heldout40b leave them out).
_DEF = re.compile(
    rf"^[ \t+]*{_MODIFIERS}(?:export\s+)?(?:default\s+)?{_MODIFIERS}(?:async\s+)?(?:pub(?:\(\w+\))?\s+)?"
    r"(?:def|class|function\*?|fn|func(?:\s+\([^)]*\))?|struct|enum|trait)\s+([A-Za-z_]\w*)"
    # An arrow function, its parameters and return type possibly over several lines
    # ("const f = async (\n  a: A,\n): Promise<B> => {").
    r"|^[ \t+]*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)(?:\s*:\s*[^=\n]+?)?\s*=\s*(?:async\s*)?"
    r"(?:\([^()]*(?:\([^()]*\)[^()]*)*\)|[\w$]+)(?:\s*:\s*[^=\n;]+?)?\s*=>",
    re.M,
)
# The keys where edit tools carry their new text.
NEW_TEXT_KEYS = ("new_string", "new_str", "content", "file_text", "replace", "text", "code", "contents")
_ERROR_LINE = re.compile(
    r"^\s*(?:E\s+)?((?:[A-Z]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b:?.*"
    # A compiler's or checker's diagnostic header: "error[E0308]: mismatched types" (rustc, ty).
    r"|error\[[\w-]+\]: .*)$",
    re.M,
)
# Tags a harness wraps its refusal in (Claude Code's <tool_use_error>, Roo's and Bob's
# <error_details> for a diff that did not match).
_TOOL_ERROR_TAG = re.compile(r"</?(?:tool_use_error|error_details)>")
# Cline's, Roo's and Bob's answer to a call their own layer refused: a fixed header line, then the
# error in an <error> block. The header says nothing of the call; the error under it is the
# identifier (as under an "ERROR:" header).
_TOOL_EXECUTION_FAILED = re.compile(
    r"^\s*The tool execution failed with the following error:\s*<error>\s*([^\n<]+?)\s*(?:\n|</error>)"
)
# npm's own error block ("npm error code E404", then its message): the message is the error when
# npm failed by itself; a script's failure (ELIFECYCLE) is reported above the block, and the
# block's last line only points at npm's log file.
_NPM_BLOCK = re.compile(r"^npm (?:error|ERR!) code (E(?!LIFECYCLE\b)[A-Z0-9_]+)\s*$", re.M)
_NPM_LINE = re.compile(
    r"^npm (?:error|ERR!) (?!code\b|errno\b|syscall\b|path\b|dest\b|A complete log\b)(\S.*)$"
)
# Roo's and Bob's multi-file read answers each file with its <content> or its <error>.
_FILE_ERROR = re.compile(r"<file>\s*<path>[^<]*</path>\s*<error>\s*([^<\n]+)", re.S)
_GENERIC_ERROR = re.compile(r"\b(?:error|failed|fatal|not found|denied|cannot|could not|unable)\b", re.I)


def _sha_ok(h: str) -> bool:
    return any(c.isdigit() for c in h) and any(c.isalpha() for c in h)


# Content an edit writes, inside a message or a shell command: aider's SEARCH/REPLACE blocks and
# heredoc bodies (``cat <<'EOF' > f``, ``apply_patch <<'PATCH'``). URLs there are content.
_EDIT_BLOCK = re.compile(r"^<{7} SEARCH\s*$.*?^>{7} REPLACE\s*$", re.M | re.S)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1[^\n]*\n.*?^\s*\2\s*$", re.M | re.S)


def without_written_content(text: str) -> str:
    """``text`` without the file content it carries (edit blocks, heredoc bodies)."""
    if "<<" in text:
        text = _EDIT_BLOCK.sub("", text) if "SEARCH" in text else text
        text = _HEREDOC.sub("", text)
    return text


# A publisher's redaction placeholder ("[REDACTED_TEXT len=3021 sha=dc9e82a0]") stands for text
# that is gone: its hash marks the redaction, it names nothing a continuation could pick up.
_REDACTED = re.compile(r"\[REDACTED\w*(?:\s[^\]\n]{0,200})?\]", re.I)


def in_text(text: str, urls: bool = True) -> Iterator[tuple[str, str]]:
    """(kind, value) of the PR/issue numbers, SHAs and URLs in a message's or call's text;
    ``urls=False`` for file content an edit writes (a URL there is content, not an anchor).
    Redaction placeholders are not read (``_REDACTED``)."""
    if "[REDACTED" in text or "[redacted" in text:
        text = _REDACTED.sub(" ", text)
    # Substring checks first: most texts hold no URL and no "#N".
    text_urls = without_written_content(text) if urls and "://" in text else ""
    if "://" in text_urls:
        for m in _URL.finditer(text_urls):
            yield "url", m.group(0).rstrip(".,;:!?")
    if "#" in text or "PR" in text or "pull" in text or "Pull" in text or "gh " in text:
        for m in _PR.finditer(text):
            yield "pr", "#" + next(g for g in m.groups() if g)
        for m in _PR_LIST.finditer(text):
            yield from (("pr", "#" + n) for n in re.findall(r"#(\d+)", m.group(0)))
    for m in _SHA.finditer(text):
        if _sha_ok(m.group(1)):
            yield "sha", m.group(1)


def in_command(cmd: str) -> Iterator[tuple[str, str]]:
    """(kind, value) of branches and created directories in a shell command."""
    for m in _BRANCH.finditer(cmd):
        name = next(g for g in m.groups() if g)
        if not name.startswith("-"):
            yield "branch", name
    for m in _MKDIR.finditer(cmd):
        try:
            parts = shlex.split(m.group(2))
        except ValueError:
            parts = m.group(2).split()
        for p in parts:
            if not p.startswith("-") or "/" in p:
                yield "dir", p.rstrip("/")


def symbols(new_text: str) -> Iterator[str]:
    """Names on definition lines of an edit's new text."""
    for m in _DEF.finditer(new_text):
        yield m.group(1) or m.group(2)


# Harness wording that holds nothing of this session (no path, argument or id of the call): a
# continuation gains nothing from it as an anchor, so a failure answered only by one of these has
# no error identifier (the failure itself still counts).
_GENERIC_MESSAGE = re.compile(
    r"^(?:File has not been read yet\b|Parameter `\w+` is required\b|This command requires approval\b|"
    r"Claude requested permissions to use \w+, but\b|Found \d+ matches of the string to replace\b|"
    r"The user doesn'?t want to (?:proceed|take this action)\b|The user denied this operation\b|User rejected\b|"
    r"\[no result recorded\b|\[aborted\b|\[declined by user\b|File does not exist\.?$|InputValidationError:|"
    r"Skipping tool \[|Tool \[\w+\] was not executed because a tool has already been used\b|\[?Request interrupted\b|String to replace not found in file\.?$|Wrong flag!|"
    r"EXECUTION TIMED OUT\b|\w+ failed: stdin is closed for this session\b|"
    # A call cut off by an interruption: the notice says nothing of the call.
    r"Task was interrupted before this tool call\b|\[interrupted: |"
    # A bare HTTP status (axios' "Request failed with status code 404"): no URL, path or argument.
    r"SearchReplaceNoExactMatch: The SEARCH section must exactly match\b|"
    r"Request failed with status code \d{3}\.?$|HTTP (?:Error|error|status) \d{3}(?::\s*[\w ]{0,40})?\.?$)",
    re.I,
)
# aider's failed-match report: "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly
# match lines in X" under its count line (the Markdown heading dropped).
_AIDER_NO_MATCH = re.compile(r"^(?:#+ )?(SearchReplaceNoExactMatch: .*?)\s*$", re.M)
# Header lines a harness writes around a command's own output (Claude Code's "Exit code 1", Codex's
# exec_command chunk header), and a build tool's wrapper around the error it reports.
_WRAPPER = re.compile(
    r"^(?:make(?:\[\d+\])?: \*\*\*|npm ERR!|npm error\b|ERR_PNPM_|error Command failed with exit code|"
    r"Command failed with exit code|error: Recipe `|\s*ELIFECYCLE\b)"
)
_DIAGNOSTIC = re.compile(r"\b(?:error|ERROR|Error)(?:\[[\w-]+\]| [A-Z]+\d+)?:\s")
# SWE-agent answers an edit that broke the syntax with a generic notice and the linter's lines.
_LINT_ERRORS = re.compile(r"^ERRORS:\s*\n- (.+)$", re.M)


# PowerShell reports an error as a record: the message, the position ("At line:1 char:13", the
# source line and its "+ ~~" marker) and its "+ CategoryInfo : …" / "+ FullyQualifiedErrorId : …"
# lines. A runtime error's message comes above the position ("pytest : The term 'pytest' is not
# recognized as the name of a cmdlet, …"), a parse error's below it ("The token '&&' is not a valid
# statement separator in this version.").
PS_RECORD = re.compile(r"^[ \t]*\+ (?:CategoryInfo|FullyQualifiedErrorId)[ \t]+:", re.M)
_PS_POSITION = re.compile(r"^At (?:line:\d+|\S.*:\d+) char:\d+\s*$")


def powershell_error(text: str) -> str | None:
    """The first line of the message of the first PowerShell error record in ``text``."""
    m = PS_RECORD.search(text)
    if not m:
        return None
    lines = text[: m.start()].splitlines()
    at = next((k for k in range(len(lines) - 1, -1, -1) if _PS_POSITION.match(lines[k].strip())), None)
    if at is None:
        return None
    below = [ln.strip() for ln in lines[at + 1 :] if ln.strip() and not ln.lstrip().startswith("+")]
    if below:
        return below[0]
    # The message above the position: its lines up to a blank line or a harness's header.
    above: list[str] = []
    for ln in reversed(lines[:at]):
        if not ln.strip() or _HARNESS_LINE.match(ln.strip()):
            break
        above.insert(0, ln.strip())
    # A command's error opens "<command> : <message>"; output printed just before it does not.
    start = next((k for k in range(len(above) - 1, -1, -1) if _PS_SOURCE.match(above[k])), 0)
    return above[start] if above else None


_HARNESS_LINE = re.compile(r"^(?:Output:|Exit code:? -?\d+|Command executed in terminal\b.*)$")
_PS_SOURCE = re.compile(r"^[\w.\\/:-]+ : \S")


def _npm_message(text: str) -> str | None:
    """The message line of npm's own error block ("npm error 404 Not Found - GET …"), when npm
    failed by itself (a code other than ELIFECYCLE)."""
    m = _NPM_BLOCK.search(text)
    if not m:
        return None
    for ln in text[m.end() :].splitlines():
        hit = _NPM_LINE.match(ln.strip())
        if hit and not re.fullmatch(r"\d{3}", hit.group(1).strip()):
            return ln.strip()
    return None


# A token that names something (a path, file, dotted name, number or id), not a plain word.
_SPECIFIC_TOKEN = re.compile(r"[\w.@~-]*[/._\d][\w./@~-]*|[`'\"][^`'\"]+[`'\"]")


def _names_something(line: str, command: str) -> bool:
    """Whether ``line`` holds a path, name, value or id, or names a program ``command`` runs: a
    library's generic message ("Could not determine the type for the passed topic") does not."""
    if any(len(t.strip("./-")) >= 2 for t in _SPECIFIC_TOKEN.findall(line)):
        return True
    programs = {_program(seg) for seg in re.split(r"\|\|?|&&?|;", command)} - {""}
    return any(re.search(rf"\b{re.escape(p)}\b", line, re.I) for p in programs)


def _program(segment: str) -> str:
    words = [w for w in segment.split() if "=" not in w]
    return words[0].rsplit("/", 1)[-1] if words else ""


def error_string(output: str, refused: bool = False, command: str = "") -> str:
    """The exact error a failing call reported: the first line of a harness or tool refusal, else
    the exception line ("TypeError: …"), else the last line that says error/failed. ``refused``:
    the harness flagged a call that ran no command as an error, so its output opens with the
    refusal whatever its wording. A generic harness message (``_GENERIC_MESSAGE``) is no anchor:
    the specific error under it, or "" when there is none; a build tool's wrapper line gives way
    to the error it wraps. ``command``: the shell command the call ran, when there is one; the
    last line of a long output that merely says error/failed is the error only when it names
    something of that command."""
    from evalkit.facts.failures import refusal_line, result_body, timeout_notice

    text = result_body(_TOOL_ERROR_TAG.sub("", output).strip())
    if text.startswith("<files>"):  # a multi-file read refused: the first file's error
        m = _FILE_ERROR.search(text)
        return "" if not m or _GENERIC_MESSAGE.match(m.group(1)) else m.group(1).strip()[:300]
    m = _TOOL_EXECUTION_FAILED.match(text)
    if m:
        return "" if _GENERIC_MESSAGE.match(m.group(1)) else m.group(1)[:300]
    notice = timeout_notice(text)
    if notice:  # the harness killed the call: its notice is the error, not a line printed before it
        return "" if _GENERIC_MESSAGE.match(notice) else notice[:300]
    m = _LINT_ERRORS.search(text)
    if m:
        return m.group(1).strip()[:300]
    m = _AIDER_NO_MATCH.search(text) if "SearchReplaceNoExactMatch" in text else None
    if m:  # aider's count line is generic; the line under it names the file
        return "" if _GENERIC_MESSAGE.match(m.group(1)) else m.group(1)[:300]
    refused = refusal_line(text) or (refused and text.splitlines()[0].strip() if text else None)
    if refused:
        return "" if _GENERIC_MESSAGE.match(refused) else refused[:300]
    found = [m.group(1).strip() for m in _ERROR_LINE.finditer(text)]
    if found:
        return found[-1][:300]
    ps = powershell_error(text) if "+ " in text else None
    if ps:
        return "" if _GENERIC_MESSAGE.match(ps) else ps[:300]
    npm = _npm_message(text)
    if npm:
        return npm[:300]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not _WRAPPER.match(ln.strip())]
    if not lines:
        return ""
    if _GENERIC_MESSAGE.match(lines[0]):
        return ""
    # A diagnostic ("src/a.c:3:1: error: …", "x.ts:2:5 - error TS2345: …", "a.rst:9: ERROR: …")
    # names the failure; a summary ("Found 1 error in x.ts") or a command echo does not.
    diag = next((ln for ln in lines if _DIAGNOSTIC.search(ln)), None)
    if diag:
        return diag[:300]
    if len(lines) <= 3:
        return lines[0][:300]
    for ln in reversed(lines):
        if _GENERIC_ERROR.search(ln):
            # A library's generic message at the end of a long output ("Could not determine the
            # type for the passed topic") holds nothing of the call: no anchor.
            return "" if command and not _names_something(ln, command) else ln[:300]
    # Several lines and none says what went wrong (a usage or options list after "Exit code 1"):
    # any line picked would be an arbitrary one, not the failure's error string.
    return ""
