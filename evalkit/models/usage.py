"""What the model client did, counted by the client (not read back from the cache).

Every call through :class:`~evalkit.models.client.ModelClient` appends one line to
``<run>/model-usage.jsonl``: how it was answered (``sent``, ``failed``, ``cache_hit``, ``shared``,
``miss``), how many HTTP attempts it took, and the tokens and cost of what was sent. Lines come
from every process of a run (replay workers too; small appends are atomic), each tagged with the
``evalkit run`` invocation, so :func:`summarize` can say what *this* run sent — a warm rerun sends 0
requests and has N cache hits — and what the folder's runs sent in all. The shape of
``model-usage.json`` is in docs/contracts.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LEDGER = "model-usage.jsonl"
SUMMARY = "model-usage.json"
INVOCATION_ENV = "EVALKIT_RUN_INVOCATION"
OUTCOMES = ("sent", "failed", "cache_hit", "shared", "miss")


def record(run_dir: str | os.PathLike, **entry: Any) -> None:
    """Append one call's line to the run's ledger."""
    entry["invocation"] = os.environ.get(INVOCATION_ENV, "")
    entry["pid"] = os.getpid()  # which process of the run made the call (stages run worker pools)
    line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
    path = Path(run_dir) / LEDGER
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as e:
        from evalkit.models.backends import StoreFailed

        raise StoreFailed(f"{path}: cannot record a model call ({e.strerror or e})") from None


def _totals(lines: list[dict]) -> dict[str, Any]:
    n = {o: sum(1 for x in lines if x.get("outcome") == o) for o in OUTCOMES}
    paid = [x for x in lines if x.get("outcome") in ("sent", "failed")]
    requests = sum(int(x.get("attempts") or 0) for x in paid)
    costs = [x["cost_usd"] for x in paid if x.get("cost_usd") is not None]
    return {
        "calls": len(lines),  # every call the stages made, however it was answered
        "requests": requests,  # HTTP requests sent (attempts, retries included)
        "retries": max(0, requests - len(paid)),
        "answered": n["sent"],  # calls the endpoint answered usably
        "failures": n["failed"],  # calls that ended in an error after their retries
        "cache_hits": n["cache_hit"],
        "shared": n["shared"],  # joined an identical call in flight in the same process
        "cache_misses": n["miss"],  # replay backend: no cached answer
        "input_tokens": sum(int(x.get("input_tokens") or 0) for x in paid),
        "output_tokens": sum(int(x.get("output_tokens") or 0) for x in paid),
        "cost_usd": round(sum(costs), 6) if costs else None,
        # answered calls whose token counts were not counts (negative, over 2^63): cost unknown
        "usage_invalid": sum(1 for x in paid if x.get("usage_invalid")),
        # answered by another model than the one asked for (the endpoint's `model` field)
        "served_model_mismatches": sum(1 for x in paid if x.get("served_model")),
    }


def read_ledger(run_dir: str | os.PathLike) -> list[dict]:
    p = Path(run_dir) / LEDGER
    if not p.exists():
        return []
    out = []
    for ln in p.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(ln))
        except json.JSONDecodeError:
            continue  # a line cut by a kill mid-write
    return out


def summarize(run_dir: str | os.PathLike, invocation: str | None = None) -> dict[str, Any] | None:
    """``model-usage.json``'s content: this invocation's totals (``total``), per purpose, and
    every invocation's in this folder (``all_runs``); None when no call was recorded."""
    lines = read_ledger(run_dir)
    if not lines:
        return None
    inv = os.environ.get(INVOCATION_ENV, "") if invocation is None else invocation
    mine = [x for x in lines if x.get("invocation") == inv]
    purposes = sorted({str(x.get("purpose")) for x in mine})
    return {
        "source": "client",  # counted by the model client as calls were made, not from the cache
        "invocation": inv,
        "total": _totals(mine),
        "by_purpose": {p: _totals([x for x in mine if str(x.get("purpose")) == p]) for p in purposes},
        "all_runs": _totals(lines),
        "invocations": len({x.get("invocation") for x in lines}),
    }
