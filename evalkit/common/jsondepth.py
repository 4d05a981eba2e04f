"""How deep JSON may nest before a reader refuses the record.

Real transcripts nest a few levels (a tool's arguments, a message's blocks). A record nested
hundreds deep parses (just) but then breaks every recursive walk after it (redaction, encoding,
facts) with a RecursionError that costs the whole file; refusing it where it is read costs that
record only, named and counted.
"""

from __future__ import annotations

from typing import Any

MAX_JSON_DEPTH = 128


def too_deep(value: Any, raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``value`` (parsed from ``raw``) nests containers deeper than ``limit``.

    Counting the raw text's brackets (in C) settles nearly every record at once; only a record
    with that many brackets is walked, iteratively."""
    opens = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    if opens <= limit:
        return False
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values() if isinstance(x, dict | list))
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v if isinstance(x, dict | list))
    return False
