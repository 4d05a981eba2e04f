"""The report's cost section: planned (``plan.json``) vs actual (the run's call cache) calls,
tokens (cached by the provider and not) and dollars, per stage."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from evalkit.contracts.records import Plan
from evalkit.contracts.runs import RunPaths, read_record
from evalkit.models.cache import unpack
from evalkit.report.markdown import num, table

# The call cache's purpose of each request, by the plan's stage.
STAGE_PURPOSES = {"summarizer": ("summarize",), "judge": ("answer", "judge"), "agent": ("agent",)}


def actual_by_stage(cache: Path) -> dict[str, dict[str, float]]:
    """Calls, input tokens (and those served from the provider's prefix cache), output tokens and
    dollars per stage, from a call cache file (answered calls only: errors are not stored)."""
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as c:
        c.create_function("unpack", 1, unpack, deterministic=True)  # responses are stored compressed
        rows = c.execute(
            "SELECT purpose, COUNT(*), COALESCE(SUM(tokens_in), 0),"
            " COALESCE(SUM(json_extract(unpack(response), '$.usage.cached_tokens')), 0),"
            " COALESCE(SUM(tokens_out), 0), SUM(cost_usd), COUNT(cost_usd) FROM calls GROUP BY purpose"
        ).fetchall()
    out: dict[str, dict[str, float]] = {}
    for purpose, n, tin, cached, tout, cost, priced in rows:
        stage = next((s for s, ps in STAGE_PURPOSES.items() if purpose in ps), purpose)
        d = out.setdefault(
            stage, {"calls": 0, "input": 0, "cached": 0, "output": 0, "cost": 0.0, "unpriced": 0}
        )
        d["calls"] += n
        d["input"] += tin
        d["cached"] += cached
        d["output"] += tout
        d["cost"] += cost or 0.0
        d["unpriced"] += n - priced
    return out


def sent_since(run: Path, plan: dict) -> dict[str, dict[str, float]] | None:
    """Calls the client sent (answered or failed) from the plan on, per stage, from the run's call
    ledger (model-usage.jsonl): what the plan's "to send" predicts. None for a plan without a
    timestamp (written by an older evalkit)."""
    from evalkit.models.usage import read_ledger

    t0, inv = plan.get("created_at"), plan.get("invocation") or None
    if t0 is None:
        return None

    def after(x: dict) -> bool:
        i = str(x.get("invocation") or "")
        try:
            return i == inv or float(i.split("-", 1)[0]) >= float(t0)
        except ValueError:
            return False

    out: dict[str, dict[str, float]] = {}
    for x in read_ledger(run):
        if x.get("outcome") not in ("sent", "failed") or not after(x):
            continue
        stage = next((s for s, ps in STAGE_PURPOSES.items() if x.get("purpose") in ps), str(x.get("purpose")))
        d = out.setdefault(stage, {"calls": 0, "input": 0, "output": 0, "cost": 0.0, "unpriced": 0})
        d["calls"] += 1
        d["input"] += int(x.get("input_tokens") or 0)
        d["output"] += int(x.get("output_tokens") or 0)
        if x.get("cost_usd") is None:
            d["unpriced"] += 1
        else:
            d["cost"] += float(x["cost_usd"])
    return out


def _usd(x: Any) -> str:
    return "unpriced" if x is None else f"${x:,.2f}"


def _int(x: Any) -> str:
    return "–" if x is None else f"{x:,.0f}"


def section_cost(data, out: Path) -> list[str]:
    """Planned vs actual per stage; says plainly when there is no plan or no paid call."""
    run = Path(data.run_dir)
    cache = RunPaths(run).call_cache
    rec = read_record(run, Plan)
    plan = rec.model_dump(mode="json", exclude_unset=True) if rec else None
    actual = actual_by_stage(cache) if cache.is_file() else {}
    if plan is None and not actual:
        return ["No model was paid for: the run made no cached model call and has no plan (`evalkit plan`)."]
    lines = []
    if plan is None:
        lines += [
            "No plan in the run folder (`evalkit plan` writes `plan.json` before a run): actual figures only.",
            "",
        ]
    else:
        lines += [
            f"Plan: {plan['sampled']} of {plan['sessions']} sessions dry-replayed; "
            + "; ".join(plan.get("notes", [])),
            "",
        ]
    totals = (plan or {}).get("totals", {})
    # Like with like: the plan's calls to send (not those already cached when it was made) against
    # the calls sent from the plan on, when the plan says when it was made.
    sent = sent_since(run, plan) if plan else None
    rows = []
    for stage in ("summarizer", "judge", "agent"):
        p, a, s = totals.get(stage), actual.get(stage), (sent or {}).get(stage)
        if p is None and a is None:
            continue
        if sent is not None:
            s = s or {"calls": 0, "input": 0, "output": 0, "cost": 0.0, "unpriced": 0}
        src = s if sent is not None else a
        rows.append(
            [
                stage,
                _int(p and (p["requests"] - p["in_cache"] if sent is not None else p["requests"])),
                _int(src and src["calls"]),
                _int(p and p["input_tokens"]),
                _int(src and src["input"]),
                _int(p and p["cached_prefix_tokens"]),
                _int(a and a["cached"]),
                _int(p and p["output_tokens"]),
                _int(src and src["output"]),
                _usd(p and p["cost_usd"]),
                _usd(src["cost"] if src and not src["unpriced"] else None),
            ]
        )
    lines.append(
        table(
            [
                "stage",
                "calls planned",
                "calls actual",
                "input planned",
                "input actual",
                "cached planned",
                "cached actual",
                "output planned",
                "output actual",
                "$ planned",
                "$ actual",
            ],
            rows,
        )
    )
    cached = sum(a["cached"] for a in actual.values())
    inputs = sum(a["input"] for a in actual.values())
    basis = (
        "Planned calls are those the plan expected to send (not already in the call cache); actual calls, "
        "tokens and dollars are those the client sent from the plan on, answered or failed (model-usage.jsonl). "
        if sent is not None
        else "Actual: answered calls in the run's call cache (failed attempts are not stored; calls answered "
        "by an earlier run sharing the cache count here too). "
    )
    lines += [
        "",
        basis + "Cached = prompt tokens the provider served "
        f"from its prefix cache (`usage.prompt_tokens_details.cached_tokens`): {num(cached / inputs if inputs else None, 3)} "
        "of actual input tokens. Planned cached = prefix an earlier request sent (an upper bound on provider hits).",
    ]
    return lines
