"""What a tool call did: the shell command it ran, the files it read or modified.

Agent tools differ in names and argument keys (Claude Code ``Bash``/``Read``/``Edit``, Codex
``shell``/``apply_patch``, SWE-agent ``str_replace_editor``, OpenHands ``execute_bash``, ...);
this module is the one place that knows them, so facts, probes and the continuation environment
agree on what counts as the same command or the same file.

It reads the session format and judges nothing: which tool runs a shell command, where its
arguments keep the command or the path, how two spellings of one command compare. That is why it
sits beside :mod:`evalkit.contracts.session` rather than in :mod:`evalkit.facts`: the ground truth and the
offline stand-ins (the heuristic agent, through the continuation recording) both read tool calls
with it, and neither's judgement (tallies, constraints, failures and fixes; what a context shows)
lives here (``tests/models/test_standin_independence.py``).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

from evalkit.contracts.session import ToolCall, ToolResult

SHELL_TOOLS = {
    "bash",
    "shell",
    "exec_command",
    "execute_bash",
    "run_command",
    "run",
    "terminal",
    "cmd",
    "local_shell",
    "container.exec",
    "run_shell_command",
}
READ_TOOLS = {"read", "read_file", "view", "view_file", "open", "open_file", "cat", "readfile"}
WRITE_TOOLS = {"write", "write_file", "create", "create_file", "writefile", "write_to_file"}
EDIT_TOOLS = {
    "edit",
    "multiedit",
    "edit_file",
    "str_replace",
    "str_replace_based_edit_tool",
    "replace",
    "apply_patch",
    "insert",
    "notebookedit",
    "patch",
    "replace_in_file",
    # Roo Code, Kilo Code and IBM Bob (Cline derivatives)
    "apply_diff",
    "insert_content",
    "search_and_replace",
    "search_replace",
}
EDITOR_TOOLS = {"str_replace_editor", "str_replace_based_edit_tool", "file_editor", "edit_tool"}
PATH_KEYS = ("file_path", "path", "filename", "file", "target_file", "notebook_path", "filepath", "filePath")


def command_of(call: ToolCall) -> str | None:
    """The shell command a call ran, or None when it is not a shell call."""
    name = call.name.lower()
    args = call.args
    cmd = args.get("command", args.get("cmd", args.get("input") if name in SHELL_TOOLS else None))
    if isinstance(cmd, list):  # Codex passes argv: ["bash", "-lc", "pytest -q"]
        parts = [str(c) for c in cmd]
        cmd = parts[-1] if len(parts) >= 3 and parts[1] in ("-lc", "-c") else shlex.join(parts)
    if not isinstance(cmd, str) or not cmd.strip():
        return None
    if name in SHELL_TOOLS or name.startswith("bash") or ("command" in args and name not in EDITOR_TOOLS):
        return cmd
    return None


_CD_PREFIX = re.compile(r"^\s*cd\s+(?:\"[^\"]*\"|'[^']*'|\S+)\s*(?:&&|;)\s*")


def normalize_command(cmd: str) -> str:
    """Whitespace folded, ``cd DIR &&`` prefixes dropped, simple quoting undone.

    Two commands that normalize alike are "the same command" for re-fail and redo detection.
    """
    s = cmd.strip()
    while True:
        stripped = _CD_PREFIX.sub("", s, count=1)
        if stripped == s:
            break
        s = stripped
    try:
        s = " ".join(shlex.split(s, posix=True))
    except ValueError:  # unbalanced quotes: keep the text, fold whitespace only
        s = " ".join(s.split())
    return s


def _path_arg(args: dict) -> str | None:
    for k in PATH_KEYS:
        v = args.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)
_SHELL_READ = re.compile(r"^(?:cat|head|tail|less|more|bat|nl)\s+(?:-\S+\s+)*([^\s|;&><]+)\s*$")
_SHELL_WRITE = re.compile(r"(?:^|[;&|]\s*)(?:[^>]*[^>\d])?>>?\s*([^\s|;&>]+)")
# Quoted strings hold text, not redirections: python -c "…", gh pr create --body "…", echo '…'.
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
# Shell commands that change files named as their arguments: (command, which arguments).
# (``sudo`` runs the command after it: ``sudo cp a /etc/b`` writes /etc/b.)
_SHELL_MODIFY = re.compile(
    r"(?:^|[;&|(]\s*)(?:sudo\s+(?:-\w+\s+)*)?(mv|cp|rm|touch|tee|sed\s+-i\S*|truncate)\s+([^;&|<>\n]+)"
)
# Python writes inside an interpreter call (OpenHands' IPython cells, python -c).
_PY_WRITE = re.compile(
    r"open\(\s*(?:r|f)?['\"]([^'\"]+)['\"]\s*,\s*['\"][wax]b?\+?['\"]|Path\(\s*['\"]([^'\"]+)['\"]\s*\)\.write_(?:text|bytes)"
)
# SWE-agent's own editor commands, run through its bash tool.
_SWE_EDIT = re.compile(r"^(?:edit|insert|append)\b")
_SWE_CREATE = re.compile(r"^create\s+(\S+)")


def _shell_text(cmd: str) -> str:
    """The command with heredoc bodies dropped and quoted strings blanked (kept as ``""``)."""
    lines, out, end = cmd.split("\n"), [], None
    for ln in lines:
        if end is not None:
            if ln.strip() == end:
                end = None
            continue
        m = _HEREDOC.search(ln)
        if m:
            end = m.group(2)
        out.append(ln)
    return _QUOTED.sub('""', "\n".join(out))


def _args_of(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def shell_modified(cmd: str) -> list[str]:
    """Files a shell command writes: redirections, ``tee``, ``mv``/``cp`` (both ends for mv),
    ``rm``, ``touch``, ``sed -i``, and Python ``open(…, 'w')`` inside ``python -c``."""
    found = [m.group(1) or m.group(2) for m in _PY_WRITE.finditer(cmd)]
    text = _shell_text(cmd)
    found += [w for w in _SHELL_WRITE.findall(text) if w not in ("/dev/null", "&1", "&2", '""')]
    for m in _SHELL_MODIFY.finditer(text):
        verb = m.group(1).split()[0]
        args = [a for a in _args_of(m.group(2)) if not a.startswith("-") and a != '""']
        if verb == "sed":
            args = args[1:]  # the script comes first
        elif verb == "cp":
            args = args[-1:]
        found += args
    return list(dict.fromkeys(p for p in found if p and not p.startswith("$")))


def files_of(call: ToolCall, open_file: str | None = None) -> tuple[list[str], list[str]]:
    """(files read, files modified) by one call. ``open_file`` is the file an editor without a
    path argument edits (SWE-agent's ``edit`` acts on the file its last ``open`` showed). A
    Windows path is spelt with forward slashes (:func:`forward_slashes`), so one file has one name."""
    read, modified = _files_of(call, open_file)
    return [forward_slashes(p) for p in read], [forward_slashes(p) for p in modified]


def _files_of(call: ToolCall, open_file: str | None) -> tuple[list[str], list[str]]:
    name = call.name.lower()
    args = call.args
    path = _path_arg(args)
    if name in EDITOR_TOOLS:
        sub = str(args.get("command", "")).lower()
        if path:
            return ([path], []) if sub == "view" else ([], [path])
        return [], []
    # Roo's and Bob's multi-file calls list their files as ``files: [{path, …}, …]``.
    files = args.get("files") if isinstance(args.get("files"), list) else []
    listed = [p for p in dict.fromkeys([path, *(f.get("path") for f in files if isinstance(f, dict))]) if p]
    if name in READ_TOOLS:
        return listed, []
    if name in WRITE_TOOLS or name in EDIT_TOOLS:
        if files:
            return [], listed
        if name in ("apply_patch", "patch"):
            text = args.get("input") or args.get("patch") or ""
            found = _PATCH_FILE.findall(text) if isinstance(text, str) else []
            return [], [p.strip() for p in found] or ([path] if path else [])
        return [], ([path] if path else ([open_file] if open_file else []))
    code = args.get("code")
    if isinstance(code, str) and name in ("execute_ipython_cell", "ipython", "python", "run_ipython"):
        return [], shell_modified(code)
    cmd = command_of(call)
    if cmd:
        s = cmd.strip()
        if _SWE_EDIT.match(s):
            return [], [open_file] if open_file else []
        m = _SWE_CREATE.match(s)
        if m:
            return [], [m.group(1)]
        # Only the plainest shell reads count; anything cleverer is not a file fact.
        m = _SHELL_READ.match(s)
        if m:
            return [m.group(1)], []
        if "apply_patch" in cmd:
            return [], [p.strip() for p in _PATCH_FILE.findall(cmd)]
        return [], shell_modified(cmd)
    return [], []


# Sessions run the same few commands over and over; shlex-splitting each once pays off.
_normalize = lru_cache(maxsize=1 << 16)(normalize_command)


def forward_slashes(path: str) -> str:
    """A Windows path with backslashes (``scripts\\seed.ts``) spelt as the same path with forward
    slashes; a shell escape (``my\\ file``) is left alone."""
    if "\\" not in path or re.search(r"\\[ \"'$`]", path):
        return path
    return path.replace("\\", "/")


def norm_path(path: str) -> str:
    """``./src/a.py`` and ``src//a.py`` are one file; absolute and relative paths stay distinct."""
    return posixpath.normpath(path.strip())


@dataclass(frozen=True, slots=True)
class Op:
    """What one tool call does, as continuation reasons about it.

    ``kind`` is ``shell`` (a command; it may also read or write files), ``read``, ``modify`` or
    ``other``. ``signature`` identifies the call exactly (tool name folded, args canonical), so an
    identical edit or an identical unknown tool call can be recognised.
    """

    kind: str
    command: str | None
    reads: tuple[str, ...]
    modifies: tuple[str, ...]
    signature: str

    def key(self) -> tuple:
        """The action's identity for 'is this the same next step?' comparisons."""
        if self.kind == "shell":
            return ("shell", self.command)
        if self.kind == "read":
            return ("read", self.reads)
        if self.kind == "modify":
            return ("modify", self.modifies)
        return ("other", self.signature)


def classify(call: ToolCall) -> Op:
    """The :class:`Op` of a tool call."""
    name = call.name.lower()
    reads, modifies = files_of(call)
    reads_t = tuple(norm_path(p) for p in reads)
    mods_t = tuple(norm_path(p) for p in modifies)
    signature = name + " " + json.dumps(call.args, sort_keys=True, ensure_ascii=False, default=str)
    cmd = command_of(call)
    if cmd is not None:
        return Op("shell", _normalize(cmd), reads_t, mods_t, signature)
    if mods_t or name in EDIT_TOOLS or name in WRITE_TOOLS:
        return Op("modify", None, reads_t, mods_t, signature)
    if reads_t:
        return Op("read", None, reads_t, mods_t, signature)
    return Op("other", None, reads_t, mods_t, signature)


def result_failed(result: ToolResult | None) -> bool:
    """A result is a failure when the tool flagged an error or the command exited non-zero."""
    return result is not None and (result.is_error or result.exit_code not in (None, 0))
