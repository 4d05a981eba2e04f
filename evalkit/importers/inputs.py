"""What every importer reads and reports: the import report (each unusable record with its file,
line and reason, counted) and the probing of inputs (first bytes, whole-file JSON, JSONL lines)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from evalkit.common.files import jsonl_lines
from evalkit.common.jsondepth import MAX_JSON_DEPTH, too_deep
from evalkit.contracts.session import (
    Compaction,
    Session,
    ToolCall,
    ToolResult,
)

HEAD_BYTES = 64 * 1024
# A whole-file JSON format above this is refused instead of loaded (JSONL formats stream).
MAX_JSON_BYTES = 512 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024 * 1024
KEEP_ISSUES = 500  # issues kept verbatim for printing; all are counted
UNRECOGNISED = "input not imported"


@dataclass(frozen=True, slots=True)
class Issue:
    """One record an importer could not use: where it is and why."""

    path: str
    line: int  # 0 when the issue concerns the whole file
    reason: str
    kind: str = "problem"  # "problem" (bad input) | "skipped" (ignored by design) | "warning" (kept)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


@dataclass
class ImportReport:
    """What an import found and what it could not use, counted by reason."""

    files: int = 0
    sessions: int = 0
    messages: int = 0
    tool_calls: int = 0
    failing_results: int = 0
    compactions: int = 0
    formats: Counter = field(default_factory=Counter)
    problems: Counter = field(default_factory=Counter)  # bad input, by reason
    skipped: Counter = field(default_factory=Counter)  # records ignored by design, by reason
    warnings: Counter = field(default_factory=Counter)  # odd but usable input, kept, by reason
    redactions: Counter = field(default_factory=Counter)
    issues: list[Issue] = field(default_factory=list)
    issue_count: int = 0

    def _add(self, issue: Issue, key: str) -> None:
        {"problem": self.problems, "warning": self.warnings}.get(issue.kind, self.skipped)[key] += 1
        self.issue_count += 1
        if len(self.issues) < KEEP_ISSUES:
            self.issues.append(issue)

    def problem(self, path: Path | str, line: int, reason: str, key: str | None = None) -> None:
        """Bad input: counted under ``key`` (default: the reason), kept with file and line."""
        self._add(Issue(str(path), line, reason, "problem"), key or reason)

    def skip(self, path: Path | str, line: int, reason: str, key: str | None = None) -> None:
        """A record ignored by design (progress lines, snapshots, UI events): counted under ``key``
        (default: the reason), kept with file and line."""
        self._add(Issue(str(path), line, reason, "skipped"), key or reason)

    def warn(self, path: Path | str, line: int, reason: str, key: str | None = None) -> None:
        """Odd input kept as it is (nothing dropped or repaired): counted under ``key``."""
        self._add(Issue(str(path), line, reason, "warning"), key or reason)

    def unrecognised(self) -> list[Issue]:
        """The input files no importer took, each with why (kept issues only)."""
        return [
            i
            for i in self.issues
            if i.kind == "skipped" and i.line == 0 and i.reason.startswith(UNRECOGNISED)
        ]

    def count_session(self, s: Session) -> None:
        self.sessions += 1
        self.formats[s.source.format] += 1
        self.messages += len(s.messages)
        for m in s.messages:
            for b in m.blocks:
                if isinstance(b, ToolCall):
                    self.tool_calls += 1
                elif isinstance(b, ToolResult) and (b.is_error or b.exit_code not in (None, 0)):
                    self.failing_results += 1
                elif isinstance(b, Compaction):
                    self.compactions += 1

    def issues_at(self, path: Path | str, line: int | None = None) -> list[Issue]:
        return [i for i in self.issues if i.path == str(path) and (line is None or i.line == line)]

    def to_dict(self) -> dict:
        return {
            "files": self.files,
            "sessions": self.sessions,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "failing_results": self.failing_results,
            "compactions": self.compactions,
            "formats": dict(self.formats),
            "problems": dict(self.problems),
            "skipped": dict(self.skipped),
            "warnings": dict(self.warnings),
            "redactions": dict(self.redactions),
            "issues": [str(i) for i in self.issues if i.kind == "problem"],
        }

    def summary(self) -> str:
        """The import summary printed by ``evalkit import``."""
        out = [
            f"imported {self.sessions} sessions from {self.files} inputs "
            f"({', '.join(f'{k}: {v}' for k, v in sorted(self.formats.items())) or 'none'})",
            f"  messages {self.messages}, tool calls {self.tool_calls}, failing results "
            f"{self.failing_results}, recorded compactions {self.compactions}",
        ]
        if self.problems:
            out.append(f"  problems ({sum(self.problems.values())}, records dropped or repaired):")
            out += [f"    {n:6}  {k}" for k, n in self.problems.most_common()]
        if self.warnings:
            out.append(f"  warnings ({sum(self.warnings.values())}, kept as they are):")
            out += [f"    {n:6}  {k}" for k, n in self.warnings.most_common()]
        if self.skipped:
            out.append(f"  skipped by design ({sum(self.skipped.values())}):")
            out += [f"    {n:6}  {k}" for k, n in self.skipped.most_common()]
        if self.redactions:
            out.append(f"  redactions ({sum(self.redactions.values())}):")
            out += [f"    {n:6}  {k}" for k, n in self.redactions.most_common()]
        return "\n".join(out)


# --------------------------------------------------------------------------- probing inputs


class Probe:
    """One input (file or folder) with its first bytes and a cached whole-file JSON parse.

    Detection and import share the probe so a JSON file is parsed once.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)

    @cached_property
    def head(self) -> bytes:
        if not self.path.is_file():
            return b""
        with open(self.path, "rb") as fh:
            return fh.read(HEAD_BYTES)

    @cached_property
    def head_text(self) -> str:
        return self.head.decode("utf-8", errors="replace")

    def looks_json(self) -> bool:
        return self.head.lstrip()[:1] in (b"{", b"[")

    _json_error: str | None = None

    @cached_property
    def json(self) -> Any:
        """The file parsed as one JSON value, or None (with ``json_error`` set)."""
        if not self.looks_json():
            self._json_error = "not JSON"
            return None
        if self.path.stat().st_size > MAX_JSON_BYTES:
            self._json_error = f"file larger than {MAX_JSON_BYTES} bytes"
            return None
        raw = self.path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self._json_error = f"not UTF-8 at byte {e.start}"
            text = raw.decode("utf-8", errors="replace")
        try:
            value = json.loads(text)
            if too_deep(value, raw):
                raise RecursionError
            return value
        except json.JSONDecodeError as e:
            truncated = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
            self._json_error = (
                "truncated JSON" if truncated else "malformed JSON"
            ) + f": {e.msg} at line {e.lineno}"
            return None
        except RecursionError:
            self._json_error = "JSON nested too deeply"
            return None

    @property
    def json_error(self) -> str | None:
        _ = self.json
        return self._json_error

    @cached_property
    def jsonl(self) -> bool:
        """True when one of the first non-blank lines is a whole JSON object by itself (JSON Lines).

        Looking past the first line keeps a JSONL file with a damaged first record JSONL.
        """
        if not self.path.is_file():
            return False
        seen = 0
        with open(self.path, "rb") as fh:
            while seen < 5:
                raw = fh.readline(MAX_LINE_BYTES)
                if not raw:
                    return False
                if not raw.strip():
                    continue
                seen += 1
                try:
                    if isinstance(json.loads(raw), dict):
                        return True
                except (ValueError, RecursionError):
                    pass
        return False

    def first_records(self, n: int = 5) -> list[dict]:
        """Up to ``n`` JSON objects from the first 50 lines (for JSONL detection). Whole lines, not
        the 64 KiB head: a first record longer than the head (a pasted file) still counts."""
        out: list[dict] = []
        if not self.path.is_file():
            return out
        with open(self.path, "rb") as fh:
            lines = [fh.readline(MAX_LINE_BYTES) for _ in range(50)]
        for raw in lines:
            if not raw.strip():
                continue
            try:
                d = json.loads(raw)
            except ValueError:
                continue
            if isinstance(d, dict):
                out.append(d)
            if len(out) >= n:
                break
        return out


def require_json(probe: Probe, report: ImportReport, want: type | tuple[type, ...]) -> Any:
    """The probe's JSON if it has the wanted type; else a problem naming the file, and None."""
    data = probe.json
    if data is None:
        report.problem(
            probe.path,
            0,
            f"file skipped: {probe.json_error}",
            key=f"file skipped: {(probe.json_error or '').split(':')[0]}",
        )
        return None
    if not isinstance(data, want):
        report.problem(probe.path, 0, f"file skipped: unexpected top-level JSON {type(data).__name__}")
        return None
    if probe._json_error:  # parsed, but only after replacing bad bytes
        report.problem(
            probe.path, 0, f"{probe._json_error}; bad bytes replaced", key="non-UTF-8 bytes replaced"
        )
    return data


def decode_reported(raw: bytes, path, n: int, report: ImportReport) -> str:
    """A line as text; bytes that are not UTF-8 become replacement characters and are reported."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        report.problem(
            path, n, f"non-UTF-8 bytes at byte {e.start}; replaced", key="non-UTF-8 bytes replaced"
        )
        return raw.decode("utf-8", errors="replace")


def jsonl_records(path: Path, report: ImportReport) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each JSONL line, split on ``\\n`` only, streamed.

    Raw U+2028 inside JSON strings is valid JSON, so ``str.splitlines`` must not be used. A line
    that is not UTF-8 is decoded with replacement characters and reported; a line that is not a
    JSON object is reported and skipped.
    """
    for n, raw in jsonl_lines(path, MAX_LINE_BYTES):
        if raw is None:
            report.problem(path, n, f"record larger than {MAX_LINE_BYTES} bytes", key="oversized record")
            continue
        if not raw.strip():
            continue
        text = decode_reported(raw, path, n, report)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            truncated = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
            key = "truncated JSON line" if truncated else "malformed JSON line"
            report.problem(path, n, f"{key}: {e.msg} at column {e.colno}", key=key)
            continue
        except RecursionError:
            obj = raw  # stands for "too deep" below
        if obj is raw or too_deep(obj, raw):
            report.problem(
                path,
                n,
                f"JSON nested deeper than {MAX_JSON_DEPTH} levels; record dropped",
                key="malformed JSON line",
            )
            continue
        if not isinstance(obj, dict):
            report.problem(
                path, n, f"expected a JSON object, got {type(obj).__name__}", key="not a JSON object"
            )
            continue
        yield n, obj
