"""Canonical corpus I/O: streaming JSONL of sessions, with errors that name file, line and field.

Sessions are streamed; nothing here loads a whole corpus into memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from evalkit.common.files import AtomicWriter, jsonl_lines, without_surrogates
from evalkit.common.jsondepth import MAX_JSON_DEPTH, too_deep
from evalkit.contracts.session import RecordError, Session, session_from_dict, session_to_json

# A single record above this is refused (loudly: counted, named) rather than parsed. The largest
# sessions are the ones compaction matters for, so the bound is far above real sessions (tens of
# MB); it only stops a runaway file from taking the machine's memory in every later stage.
MAX_RECORD_BYTES = 256 * 1024 * 1024

OnError = Literal["raise", "skip"]


class CorpusError(ValueError):
    """A bad record: ``path:line: field: reason``."""

    def __init__(self, path: str | os.PathLike, line: int, field: str, reason: str):
        self.path, self.line, self.field, self.reason = str(path), line, field, reason
        super().__init__(f"{self.path}:{line}: {field}: {reason}")


@dataclass
class ReadStats:
    """What a read saw: records read, sessions kept, and each skipped record's error."""

    records: int = 0
    sessions: int = 0
    skipped: list[CorpusError] = field(default_factory=list)

    @property
    def skipped_count(self) -> int:
        return len(self.skipped)

    def reasons(self) -> Counter:
        """Skipped records counted by field, for one-line summaries."""
        return Counter(e.field for e in self.skipped)

    def skipped_records(self) -> list[dict]:
        """Each skipped record as ``{file, line, field, reason}`` (the corpus manifest's list)."""
        return [{"file": e.path, "line": e.line, "field": e.field, "reason": e.reason} for e in self.skipped]

    def summary(self) -> str:
        line = f"{self.sessions} sessions read from {self.records} records"
        if self.skipped:
            why = ", ".join(f"{k}: {v}" for k, v in sorted(self.reasons().items()))
            line += f"; skipped {self.skipped_count} ({why})"
        return line


# A JSON escape of a surrogate code point (most are halves of a proper pair; the check is cheap).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _clean(v):
    if isinstance(v, str):
        return without_surrogates(v)
    if isinstance(v, dict):
        return {_clean(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def parse_line(raw: bytes, path: Path | str, line: int) -> Session:
    """Decode and validate one JSONL line; raises :class:`CorpusError`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(path, line, "(bytes)", f"not UTF-8 at byte {e.start}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        reason = "truncated JSON" if e.pos >= len(text.rstrip()) else f"invalid JSON at column {e.colno}"
        raise CorpusError(path, line, "(json)", f"{reason}: {e.msg}") from None
    except RecursionError:
        obj = raw  # stands for "too deep" below
    if obj is raw or too_deep(obj, raw):
        raise CorpusError(path, line, "(json)", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(raw):
        # A lone surrogate decodes from JSON but can be written by no later stage (UTF-8 refuses
        # it): the canonical corpus holds U+FFFD in its place.
        obj = _clean(obj)
    try:
        return session_from_dict(obj)
    except RecordError as e:
        raise CorpusError(path, line, e.field, e.reason) from None
    except RecursionError:
        raise CorpusError(path, line, "(json)", "JSON nested too deeply") from None


def read_sessions(
    path: str | os.PathLike,
    on_error: OnError = "raise",
    stats: ReadStats | None = None,
    max_record_bytes: int = MAX_RECORD_BYTES,
) -> Iterator[Session]:
    """Stream sessions from a JSONL file (or a corpus folder's ``sessions.jsonl``).

    With ``on_error="skip"`` a bad record is recorded in ``stats.skipped`` and reading goes on.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "sessions.jsonl"
    stats = stats if stats is not None else ReadStats()
    for n, raw in jsonl_lines(p, max_record_bytes):
        if raw is not None and not raw.strip():
            continue
        stats.records += 1
        try:
            if raw is None:
                raise CorpusError(p, n, "(record)", f"record larger than {max_record_bytes} bytes")
            session = parse_line(raw, p, n)
        except CorpusError as err:
            if on_error == "raise":
                raise
            stats.skipped.append(err)
            continue
        stats.sessions += 1
        yield session


def session_hash(line: str) -> str:
    """Content hash of a session's canonical JSON line (the manifest's identity for a session)."""
    return hashlib.sha256(line.encode("utf-8")).hexdigest()[:16]


def write_sessions(path: str | os.PathLike, sessions: Iterable[Session]) -> list[dict]:
    """Write sessions as JSONL (atomically); returns manifest rows (id, hash, messages, bytes)."""
    rows = []
    with AtomicWriter(path) as fh:
        for s in sessions:
            line = session_to_json(s)
            fh.write(line + "\n")
            rows.append(
                {
                    "id": s.id,
                    "hash": session_hash(line),
                    "format": s.source.format,
                    "messages": len(s.messages),
                    "bytes": len(line.encode("utf-8")) + 1,
                }
            )
    return rows
