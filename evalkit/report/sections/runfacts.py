"""Section 2, run facts: what ran (corpus, arms, models, seeds, sizes) and the model calls it made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.contracts.records import ModelUsage
from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import (
    code,
    table,
)
from evalkit.report.sections.common import is_standin
from evalkit.report.sections.usage import usage_rows


def _first(d: dict, *keys: str) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return None


def _model_stat_rows(data: ReportData, standin: bool) -> list[list[str]]:
    rec = data.model_stats
    if isinstance(rec, ModelUsage) and rec.source == "client":  # counted by the client
        return usage_rows(rec.model_dump(), standin)
    # model-calls.json (the call cache's counts), or an older usage file
    s = rec.model_dump(exclude_unset=True, exclude={"schema_version"}) if rec else {}
    s = s.get("total") or s.get("totals") or s
    if not isinstance(s, dict) or not s:
        why = "n/a (no model-call statistics in the run folder)"
        cost = "0 (offline stand-in: no API calls)" if standin else why
        return [["model calls / cache hits", why], ["tokens / estimated cost", cost]]
    calls = _first(s, "model_calls", "calls", "requests")
    hits = _first(s, "cache_hits", "hits")
    misses = _first(s, "cache_misses", "misses")
    tin = _first(s, "prompt_tokens", "input_tokens", "tokens_in")
    tout = _first(s, "completion_tokens", "output_tokens", "tokens_out")
    cost = _first(s, "estimated_cost_usd", "cost_usd", "cost")
    calls_txt = (
        f"{calls if calls is not None else 'n/a'} calls; cache hits {hits if hits is not None else 'n/a'}"
    )
    if misses is not None:
        calls_txt += f", misses {misses}"
    tok = f"in {tin if tin is not None else 'n/a'}, out {tout if tout is not None else 'n/a'} tokens"
    cost_txt = f"${float(cost):.2f}" if isinstance(cost, int | float) else "n/a"
    if standin and cost is None:
        cost_txt = "0 (offline stand-in: no API calls)"
    return [["model calls / cache hits", calls_txt], ["tokens / estimated cost", f"{tok}; cost {cost_txt}"]]


def section_run_facts(data: ReportData, out: Path) -> list[str]:
    cfg, rc, stats = data.config, data.run_config, data.manifest.stats
    model, replay = cfg.get("model", {}), cfg.get("replay", {})
    standin = is_standin(data)
    kind = data.manifest.kind or cfg.get("corpus", {}).get("kind") or "n/a"
    formats = ", ".join(f"{escape_inline(str(k))}: {v}" for k, v in (stats.get("formats") or {}).items())
    corpus = f"{escape_inline(str(kind))} ({formats or 'formats n/a'})"
    if kind == "path" and cfg.get("corpus", {}).get("path"):
        corpus += " from " + code(cfg["corpus"]["path"])
    mb = stats.get("bytes")
    ev = data.events
    if len(ev):
        per_arm = ev.groupby("arm").size()
        events_txt = ", ".join(f"{escape_inline(a)} {n}" for a, n in per_arm.items())
        rounds_txt = f"1–{int(ev['round'].max())} (median {ev.groupby(['arm', 'session'])['round'].max().median():.0f} per session)"
    else:
        events_txt = rounds_txt = "n/a (no events)"
    backend = f"{model.get('backend', 'n/a')} / {model.get('model', 'n/a')}"
    if standin:
        backend += " — **offline stand-in, not a language model**"
    st = data.decision.stats
    stats_txt = (
        f"{st.get('method', 'n/a')}, {st.get('resamples', 'n/a')} resamples, alpha {st.get('alpha', 'n/a')}, "
        f"seed {st.get('seed', 'n/a')}, unit: {st.get('unit', 'n/a')}"
        if st
        else "n/a (`decision.json` has no `stats`: intervals were not computed)"
    )
    t = data.timings.stages()
    if t:
        total = t.get("total_before_report")
        stages = ", ".join(f"{k} {float(v):.1f} s" for k, v in t.items() if k != "total_before_report")
        wall = f"{float(total):.1f} s before the report ({stages})" if total is not None else stages
        skipped = [k for k in ("corpus", "replay", "score") if k not in t]
        if skipped:
            wall += f"; {', '.join(skipped)} reused from an earlier invocation (--resume), not timed"
    else:
        wall = "n/a (no `timings.json`)"
    rows = [
        ["corpus", corpus],
        [
            "sessions / messages / size",
            f"{stats.get('sessions', 'n/a')} / {stats.get('messages', 'n/a')} / "
            + (f"{mb / 1e6:.1f} MB" if isinstance(mb, int | float) else "n/a"),
        ],
        [
            "facts in the corpus",
            f"{stats.get('tallies', 'n/a')} test tallies, {stats.get('constraints', 'n/a')} "
            f"user constraints, {stats.get('failing_commands', 'n/a')} failing commands, "
            f"{stats.get('recorded_compactions', 'n/a')} recorded compactions",
        ],
        ["compactions replayed (events per arm)", events_txt],
        ["compaction rounds", rounds_txt],
        ["arms", ", ".join(code(a) for a in data.arms) or "n/a"],
        [
            "window / reserve / keep recent",
            f"{replay.get('window', 'n/a')} / {replay.get('reserve', 'n/a')} / "
            f"{replay.get('keep_recent', 'n/a')} tokens ({replay.get('tokenizer', 'n/a')})",
        ],
        ["backend / model", backend],
        ["replicates", str(model.get("replicates", "n/a"))],
        ["seed", str(cfg.get("seed", "n/a"))],
        ["statistics", stats_txt],
        *_model_stat_rows(data, standin),
        ["wall time", wall],
        ["config hash", code(rc.config_hash) if rc.config_hash else "n/a"],
        # the command that reproduces it: same config, same seed, same numbers
        ["reproduce", code(rc.command) if rc.command else "n/a (no `config.json`)"],
    ]
    lines = [table(["fact", "value"], rows)]
    return lines
