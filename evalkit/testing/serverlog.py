"""Reading the fake server's JSONL request log: every request (at once, or once the log has
settled when a client may have left requests on the wire), and the ones that got a usable answer
(one per completed, paid call)."""

from __future__ import annotations

import json
import time
from pathlib import Path


def read_log(path: str | Path) -> list[dict]:
    """The fake server's request log, one entry per request, with any later amendment of a
    request's status (its client gave up before the answer was written) folded into it.

    The server writes a request's line when it arrives, before answering it: once a client has
    its answers, their lines are all here, so a test reads the log at once."""
    p = Path(path)
    if not p.exists():
        return []
    entries: list[dict] = []
    latest: dict[tuple, dict] = {}  # (key, attempt) -> its entry (a restarted server counts anew)
    for ln in p.read_text(encoding="utf-8").splitlines():
        if not ln.strip():
            continue
        e = json.loads(ln)
        if "amends" in e:
            target = latest.get((e["amends"]["key"], e["amends"]["attempt"]))
            if target is not None:
                target["status"] = e["status"]
            continue
        entries.append(e)
        if e.get("key") is not None:
            latest[(e["key"], e.get("attempt"))] = e
    return entries


def settled_log(path: str | Path, quiet: float = 1.0, limit: float = 30.0) -> list[dict]:
    """The request log once it has stopped growing for ``quiet`` seconds (at most ``limit``).

    Only for a reader whose client may have left requests on the wire (a killed process, a
    client that stopped waiting): those requests' lines, or their amendments, come when the
    server gets to them, and on a loaded 2-core machine its thread can be starved for a few
    hundred ms. A client that returned normally has all its lines in the log: use ``read_log``."""
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
