"""Reading the fake server's JSONL request log: every request, once the log has settled, and the
ones that got a usable answer (one per completed, paid call)."""

from __future__ import annotations

import json
import time
from pathlib import Path


def read_log(path: str | Path) -> list[dict]:
    """The fake server's request log."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(ln) for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]


def settled_log(path: str | Path, quiet: float = 1.0, limit: float = 30.0) -> list[dict]:
    """The request log once it has stopped growing for ``quiet`` seconds (at most ``limit``).

    The server writes a request's line just after answering it, and a hung ("timeout") attempt
    only when it lets go; reading right after the client returns can miss those lines. A second
    of quiet: on a loaded 2-core machine the server thread can be starved for a few hundred ms."""
    p = Path(path)
    end, size, since = time.time() + limit, -1, time.time()
    while time.time() < end:
        now = p.stat().st_size if p.exists() else 0
        if now != size:
            size, since = now, time.time()
        elif time.time() - since >= quiet:
            break
        time.sleep(0.02)
    return read_log(p)


def answered(log: list[dict]) -> list[dict]:
    """The log entries that got a usable answer (no failing fault): one per completed call."""
    return [
        e
        for e in log
        if e.get("method") == "POST"
        and e.get("key")  # a model call (a batch's creation is logged without one)
        and e.get("status") == 200
        and e.get("fault") in (None, "latency")
    ]
