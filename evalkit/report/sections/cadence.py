"""Cadence and cost per compaction (the ``cadence`` probe): per arm, how often it compacts, how far
apart, what a cycle frees, whether it loops, and its summarizer's calls, tokens, seconds and
dollars per compaction as the run's call cache recorded them."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pandas as pd

from evalkit.decide.stage import REFERENCE_ARMS
from evalkit.report.data import ReportData
from evalkit.report.markdown import code, merge_same_rows, table

LOOP_SHARE = 0.5  # an arm whose compactions mostly loop is flagged


def summarizer_costs(cache: Path, events: pd.DataFrame, prices: bool) -> dict[str, tuple[str, str]]:
    """Per arm, seconds and dollars per compaction of its summarizer calls, as the run's call
    cache recorded them (``latency_s``, ``cost_usd``) for the calls its events name by
    ``request_key``. Dollars only with a price table (``prices``) and for priced calls: otherwise
    "n/a (no prices)", never 0."""
    keys = events.dropna(subset=["request_key"]) if "request_key" in events else events.iloc[0:0]
    recorded: dict[str, tuple[float | None, float | None]] = {}
    if cache.is_file() and len(keys):
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as c:
            q = "SELECT key, latency_s, cost_usd FROM calls WHERE purpose = 'summarize'"
            recorded = {k: (s, d) for k, s, d in c.execute(q)}
    out = {}
    for arm in events["arm"].unique():
        mine = keys[keys["arm"] == arm]["request_key"]
        if not len(mine):
            out[arm] = ("– (no call)", "– (no call)")
            continue
        rows = [recorded[k] for k in mine if k in recorded]
        if not rows:
            out[arm] = ("n/a (not recorded)", "n/a (not recorded)" if prices else "n/a (no prices)")
            continue
        secs = [s for s, _ in rows if s is not None]
        usd = [d for _, d in rows if d is not None]
        out[arm] = (
            f"{sum(secs) / len(secs):.2f}" if secs else "n/a (not recorded)",
            (
                f"${sum(usd) / len(usd):.4f}"
                + (f" ({len(rows) - len(usd)} unpriced)" if len(usd) < len(rows) else "")
            )
            if usd and prices
            else "n/a (no prices)",
        )
    return out


def _cache_path(data: ReportData) -> Path:
    shared = (data.config.get("model") or {}).get("cache_path") or ""
    return Path(shared) if shared else Path(data.run_dir) / "model-calls.sqlite"


_READS = (
    "loop",
    "compactions_per_100k",
    "context_freed",
    "summarizer_calls",
    "summarizer_input_tokens",
    "summarizer_output_tokens",
)


def section_cadence(data: ReportData, out: Path) -> list[str]:
    """Per arm: compactions per 100k tokens, turns between, context freed, loops, summarizer cost."""
    # Only the rows this section reads: the whole table without its errors is a copy of ~all of it.
    mt = data.metrics
    m = mt[mt["metric"].isin(_READS) & mt["error"].isna()] if len(mt) else mt
    if not len(m) or "loop" not in set(m["metric"].unique()):
        return ["No `cadence` probe rows in this run."]

    def mean_of(metric: str, arm: str) -> float:
        """The mean over the arm's events (the session rows carry each session's sum and count)."""
        v = m[(m["arm"] == arm) & (m["metric"] == metric)]
        return float(v["sum"].sum() / v["n"].sum()) if v["n"].sum() else math.nan

    def median_of(metric: str, arm: str) -> float:
        ev = data.event_values
        v = ev[(ev["arm"] == arm) & (ev["metric"] == metric)]["value"] if len(ev) else ev
        return float(v.median()) if len(v) else math.nan

    prices = bool((data.config.get("model") or {}).get("prices"))
    costs = summarizer_costs(_cache_path(data), data.events, prices) if len(data.events) else {}
    rows, looping = [], []
    for arm in data.arms:
        if arm in REFERENCE_ARMS:  # the exams' ceiling and floor never compact: nothing to pace
            continue
        n = int(m[(m["arm"] == arm) & (m["metric"] == "loop")]["n"].sum())
        if not n:
            continue
        share = mean_of("loop", arm)
        per100k = mean_of("compactions_per_100k", arm)
        turns = median_of("turns_between", arm)
        freed = mean_of("context_freed", arm)
        if share > LOOP_SHARE:
            looping.append(
                f"`{arm}`: {100 * share:.0f}% of its {n} compactions loop; {per100k:.1f} compactions per 100k "
                f"tokens of work, median {turns:.0f} turn(s) apart, each freeing {100 * freed:.1f}% of the context"
            )
        secs, usd = costs.get(arm, ("n/a (not recorded)", "n/a (not recorded)"))
        rows.append(
            [
                code(arm) + (" **LOOPING**" if share > LOOP_SHARE else ""),
                str(n),
                f"{per100k:.2f}",
                f"{turns:.0f}",
                f"{100 * freed:.1f}%",
                f"{100 * share:.0f}%",
                f"{mean_of('summarizer_calls', arm):.2f}",
                f"{mean_of('summarizer_input_tokens', arm):,.0f}",
                f"{mean_of('summarizer_output_tokens', arm):,.0f}",
                secs,
                usd,
            ]
        )
    header = [
        "arm",
        "compactions",
        "per 100k tokens",
        "median turns between",
        "context freed",
        "loop",
        "summarizer calls",
        "input tokens",
        "output tokens",
        "seconds",
        "dollars",
    ]
    return [
        "How often each arm compacts and what a cycle frees and costs. The summarizer columns are per "
        "compaction: calls, tokens (chars/4 of the request and the summary), and the seconds and dollars "
        "the run's call cache recorded for each compaction's call (a call answered once and reused by "
        "another arm or run counts for each; dollars need a `[model.prices]` table; an offline stand-in "
        "records no calls). A compaction *loops* when it comes within a few turns of the previous one "
        "or frees little of the context (the `cadence` probe's `min_turns` / `min_freed`).",
        "",
        *(["**Looping:** " + "; ".join(looping) + ".", ""] if looping else []),
        table(header, merge_same_rows(rows)),
    ]
