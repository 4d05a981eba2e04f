"""Canonical corpus I/O: streaming JSONL of sessions, with errors that name file, line and field.

Sessions are streamed; nothing here loads a whole corpus into memory.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from evalkit.common.files import AtomicWriter, jsonl_lines
from evalkit.contracts.session import RecordError, Session, session_from_dict, session_to_json

# A single record above this is refused rather than parsed: a 10 MB message in a transcript is a
# pasted binary or a runaway log, and parsing it would only blow up memory in every later stage.
MAX_RECORD_BYTES = 8 * 1024 * 1024

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

    def summary(self) -> str:
        line = f"{self.sessions} sessions read from {self.records} records"
        if self.skipped:
            why = ", ".join(f"{k}: {v}" for k, v in sorted(self.reasons().items()))
            line += f"; skipped {self.skipped_count} ({why})"
        return line


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
    try:
        return session_from_dict(obj)
    except RecordError as e:
        raise CorpusError(path, line, e.field, e.reason) from None


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
