"""The run-facts rows for model calls, from the client's ledger summary (``model-usage.json``):
requests sent, retries, failures and cache hits of this run, tokens and cost."""

from __future__ import annotations

from typing import Any


def usage_rows(usage: dict[str, Any], standin: bool) -> list[list[str]]:
    """Two rows: what was sent and answered, and tokens/cost (this invocation of the run)."""
    t = usage.get("total") or {}
    calls = (
        f"{t.get('requests', 0)} requests sent ({t.get('retries', 0)} retries) for {t.get('calls', 0)} calls: "
        f"{t.get('answered', 0)} answered, {t.get('failures', 0)} failed, "
        f"{t.get('cache_hits', 0)} cache hits, {t.get('shared', 0)} shared in flight"
    )
    if t.get("cache_misses"):
        calls += f", {t['cache_misses']} cache misses"
    runs = usage.get("invocations") or 1
    if runs > 1:
        a = usage.get("all_runs") or {}
        calls += f" (all {runs} runs into this folder: {a.get('requests', 0)} requests sent)"
    cost = t.get("cost_usd")
    cost_txt = f"${float(cost):.2f}" if isinstance(cost, int | float) else "n/a (no prices set)"
    if standin and cost is None:
        cost_txt = "0 (offline stand-in: no API calls)"
    tok = f"in {t.get('input_tokens', 0)}, out {t.get('output_tokens', 0)} tokens sent"
    return [["model calls / cache hits", calls], ["tokens / estimated cost", f"{tok}; cost {cost_txt}"]]
