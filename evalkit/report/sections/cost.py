"""The report's cost section: planned (``plan.json``) vs actual (the run's call cache) calls,
tokens (cached by the provider and not) and dollars, per stage."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from evalkit.report.markdown import num, table

# The call cache's purpose of each request, by the plan's stage.
STAGE_PURPOSES = {"summarizer": ("summarize",), "judge": ("answer", "judge"), "agent": ("agent",)}


def actual_by_stage(cache: Path) -> dict[str, dict[str, float]]:
    """Calls, input tokens (and those served from the provider's prefix cache), output tokens and
    dollars per stage, from a call cache file (answered calls only: errors are not stored)."""
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as c:
        rows = c.execute(
            "SELECT purpose, COUNT(*), COALESCE(SUM(tokens_in), 0),"
            " COALESCE(SUM(json_extract(response, '$.usage.cached_tokens')), 0),"
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


def _usd(x: Any) -> str:
    return "unpriced" if x is None else f"${x:,.2f}"


def _int(x: Any) -> str:
    return "–" if x is None else f"{x:,.0f}"


def section_cost(data, out: Path) -> list[str]:
    """Planned vs actual per stage; says plainly when there is no plan or no paid call."""
    run = Path(data.run_dir)
    plan_path, cache = run / "plan.json", run / "model-calls.sqlite"
    plan = json.loads(plan_path.read_text(encoding="utf-8")) if plan_path.is_file() else None
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
    rows = []
    for stage in ("summarizer", "judge", "agent"):
        p, a = totals.get(stage), actual.get(stage)
        if p is None and a is None:
            continue
        rows.append(
            [
                stage,
                _int(p and p["requests"]),
                _int(a and a["calls"]),
                _int(p and p["input_tokens"]),
                _int(a and a["input"]),
                _int(p and p["cached_prefix_tokens"]),
                _int(a and a["cached"]),
                _int(p and p["output_tokens"]),
                _int(a and a["output"]),
                _usd(p and p["cost_usd"]),
                _usd(a["cost"] if a and not a["unpriced"] else None),
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
    lines += [
        "",
        "Actual: answered calls in the run's call cache (failed attempts are not stored; calls answered "
        "by an earlier run sharing the cache count here too). Cached = prompt tokens the provider served "
        f"from its prefix cache (`usage.prompt_tokens_details.cached_tokens`): {num(cached / inputs if inputs else None, 3)} "
        "of actual input tokens. Planned cached = prefix an earlier request sent (an upper bound on provider hits).",
    ]
    return lines
