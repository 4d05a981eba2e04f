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


def jsonl_lines(path: str | os.PathLike, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """Yield (line number, raw bytes) splitting on ``\\n`` only; None for a line over the limit.

    ``str.splitlines`` would also split on U+2028 inside JSON strings, which is valid JSON.
    """
    with open(path, "rb") as fh:
        n = 0
        while True:
            raw = fh.readline(max_bytes + 1)
            if not raw:
                return
            n += 1
            if len(raw) > max_bytes and not raw.endswith(b"\n"):
                # Drain the rest of the oversized line without holding it.
                while True:
                    chunk = fh.readline(1 << 20)
                    if not chunk or chunk.endswith(b"\n"):
                        break
                yield n, None
                continue
            yield n, raw


Span = tuple[int, int, int]  # (byte offset, length, line number) of one JSONL line


def index_jsonl(path: str | os.PathLike, field: str) -> dict[str, list[Span]]:
    """Value of a top-level string ``field`` → the spans of the lines holding it, in file order.

    Stages that group one file's lines by session (events by ``session``, the corpus by ``id``)
    find the key with a regex on each line's first 4 KiB instead of parsing it, then hand the
    spans to workers (:func:`read_span`). A line without the key is indexed under
    ``"<unreadable line N>"`` so callers can report it.
    """
    key = re.compile(rb'"' + re.escape(field.encode()) + rb'"\s*:\s*"((?:[^"\\]|\\.)*)"')
    out: dict[str, list[Span]] = {}
    with open(path, "rb") as fh:
        off = 0
        for n, line in enumerate(fh, 1):
            if line.strip():
                m = key.search(line, 0, 4096) or key.search(line)
                try:
                    value = json.loads(b'"' + m.group(1) + b'"') if m else f"<unreadable line {n}>"
                except ValueError:  # not UTF-8, a bad escape: the readers report the line itself
                    value = f"<unreadable line {n}>"
                out.setdefault(value, []).append((off, len(line), n))
            off += len(line)
    return out


def read_span(path: str | os.PathLike, span: Span) -> bytes:
    """The bytes of one indexed line."""
    with open(path, "rb") as fh:
        fh.seek(span[0])
        return fh.read(span[1])


_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON escape of a surrogate code point (most are halves of a proper pair; the check is cheap).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def without_surrogates(text: str) -> str:
    """``text`` with lone surrogates (half an emoji cut in a transcript) as U+FFFD; pairs written
    as two escapes become the one character they encode."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


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


class AtomicWriter:
    """Write to ``path.tmp`` and rename on success, so a crash never leaves a half file behind."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.tmp, "w", encoding="utf-8", newline="\n")
        return self.fh

    def __exit__(self, exc_type, exc, tb):
        self.fh.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)
        return False


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


def write_json(path: str | os.PathLike, obj) -> None:
    """Pretty, key-sorted JSON written atomically (manifests, configs, verdicts).

    A lone surrogate (half an emoji cut in a transcript, read from a ``\\ud83d`` escape) is
    written back as that escape: it cannot be encoded as UTF-8, and only occurs inside strings."""
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    with AtomicWriter(path) as fh:
        fh.write(text + "\n")
