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

_URL = re.compile(r"https?://[^\s<>\"'`)\]}|]+")
_PR = re.compile(
    r"(?:\b(?:PR|pull request)[ \t]*#?(\d{1,7})\b)"
    r"|(?:\b(?:issue|pull|fixes|closes|resolves|fix|close|resolve|see)[ \t]*#(\d{1,7})\b)"
    r"|(?:\b[\w.-]+/[\w.-]+#(\d{1,7})\b)"
    r"|(?:github\.com/[\w.-]+/[\w.-]+/(?:pull|issues)/(\d{1,7}))"
    r"|(?:\bgh (?:pr|issue) (?:view|checkout|merge|close|comment|edit|diff|review) #?(\d{1,7})\b)",
    re.I,
)
_SHA = re.compile(r"(?<![\w#/.-])([0-9a-f]{7,40})(?![\w-])")
_BRANCH = re.compile(
    r"\bgit\s+(?:checkout\s+-[bB]|switch\s+-[cC]|branch(?:\s+-[mM])?)\s+([\w./-]+)"
    r"|\bgit\s+push\s+(?:-\S+\s+)*[\w.-]+\s+(?:HEAD:)?([\w./-]+)"
    r"|\bgh\s+pr\s+create\b[^\n]*?--head\s+([\w./-]+)"
)
_MKDIR = re.compile(r"(?:^|[;&|(]\s*|\s)mkdir\s+((?:-\S+\s+)*)([^;&|<>\n]+)")
_DEF = re.compile(
    r"^[ \t+]*(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:pub(?:\(\w+\))?\s+)?"
    r"(?:def|class|function\*?|fn|func(?:\s+\([^)]*\))?|interface|struct|enum|trait)\s+([A-Za-z_]\w*)"
    r"|^[ \t+]*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?(?:\([^)]*\)|[\w$]+)\s*=>",
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
_TOOL_ERROR_TAG = re.compile(r"</?tool_use_error>")
_GENERIC_ERROR = re.compile(r"\b(?:error|failed|fatal|not found|denied|cannot|could not|unable)\b", re.I)


def _sha_ok(h: str) -> bool:
    return any(c.isdigit() for c in h) and any(c.isalpha() for c in h)


def in_text(text: str) -> Iterator[tuple[str, str]]:
    """(kind, value) of the PR/issue numbers, SHAs and URLs in a message's or call's text."""
    # Substring checks first: most texts hold no URL and no "#N".
    if "://" in text:
        for m in _URL.finditer(text):
            yield "url", m.group(0).rstrip(".,;:!?")
    if "#" in text or "PR" in text or "pull" in text or "Pull" in text or "gh " in text:
        for m in _PR.finditer(text):
            yield "pr", "#" + next(g for g in m.groups() if g)
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
            if not p.startswith("-"):
                yield "dir", p.rstrip("/")


def symbols(new_text: str) -> Iterator[str]:
    """Names on definition lines of an edit's new text."""
    for m in _DEF.finditer(new_text):
        yield m.group(1) or m.group(2)


def error_string(output: str, refused: bool = False) -> str:
    """The exact error a failing call reported: the first line of a harness or tool refusal, else
    the exception line ("TypeError: …"), else the last line that says error/failed. ``refused``:
    the harness flagged a call that ran no command as an error, so its output opens with the
    refusal whatever its wording."""
    from evalkit.facts.failures import refusal_line

    text = _TOOL_ERROR_TAG.sub("", output).strip()
    refused = refusal_line(text) or (refused and text.splitlines()[0].strip() if text else None)
    if refused:
        return refused[:300]
    found = [m.group(1).strip() for m in _ERROR_LINE.finditer(text)]
    if found:
        return found[-1][:300]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    if len(lines) <= 3:
        return lines[0][:300]
    for ln in reversed(lines):
        if _GENERIC_ERROR.search(ln):
            return ln[:300]
    return lines[-1][:300]
