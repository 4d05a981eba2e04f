"""Files every stage writes and reads the same way: atomic writes (a crash never leaves half a
file), key-sorted JSON, and JSONL read a line at a time or by indexed byte spans."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

from evalkit.contracts.atomic import AtomicWriter, write_json

__all__ = ["AtomicWriter", "index_jsonl", "jsonl_lines", "read_span", "without_surrogates", "write_json"]


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


def without_surrogates(text: str) -> str:
    """``text`` with lone surrogates (half an emoji cut in a transcript) as U+FFFD; pairs written
    as two escapes become the one character they encode."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
