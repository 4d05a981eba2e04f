"""The report's sections, in the order a reader needs them (issue #9).

Each section is ``fn(data, out_dir) -> list[str]`` of Markdown lines. A section whose inputs are
missing says which file or key is missing and what would fill it, instead of disappearing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from evalkit.events import events_path
from evalkit.models import is_offline_standin
from evalkit.report.calibration import section_calibration
from evalkit.report.cost import section_cost
from evalkit.report.data import ReportData, read_event
from evalkit.report.escape import escape_inline, excerpt
from evalkit.report.figures import ForestRow, compounding_plot, draw_all, forest_plot
from evalkit.report.health import section_health
from evalkit.report.markdown import (
    code,
    fenced,
    heading_anchor,
    interval,
    name,
    num,
    pval,
    rel_link,
    slug,
    table,
)
from evalkit.report.usage import usage_rows

VERDICT_MARK = {
    "ship": "✅ ship",
    "drop": "❌ drop",
    "inconclusive": "❔ inconclusive",
    "untested": "⏸ untested",
}
LOW_N = 30  # below this many sessions, intervals are wide (and seldom decide anything)
EVIDENCE_SESSIONS = 3
EVIDENCE_QUOTES = 3


def verdict_mark(v: Any) -> str:
    return VERDICT_MARK.get(str(v), f"❓ {escape_inline(str(v))}")


def _standin(data: ReportData) -> bool:
    backend = data.config.get("model", {}).get("backend")
    if not backend:
        return False
    try:
        return is_offline_standin(backend)
    except KeyError:  # a backend this install does not know; it is not the built-in stand-in
        return False


def _confidence(data: ReportData) -> str:
    """The intervals' level: ``ci_level`` as the stats stage wrote it (two-sided 1 − 2α for its
    one-sided tests); older runs without it are read as two-sided 1 − α."""
    stats = data.decision.get("stats", {})
    try:
        level = float(stats["ci_level"]) if "ci_level" in stats else 1 - float(stats.get("alpha"))
        return f"{100 * level:.0f}% interval"
    except (TypeError, ValueError):
        return "interval"


def _interval_name(data: ReportData) -> str:
    """Which interval ``ci`` is: ``printed_interval`` as the stats stage wrote it (runs before it
    printed the inverted sign-flip test)."""
    return "clustered t" if data.decision.get("stats", {}).get("printed_interval") == "t" else "sign-flip"


def preamble(data: ReportData, titles: list[str]) -> list[str]:
    out = [f"# evalkit report: {escape_inline(data.name)}", ""]
    model = data.config.get("model", {})
    if _standin(data):
        out += [
            f"> **Offline stand-in.** Summaries come from the `{model.get('backend')}` backend, a "
            "deterministic extractive summarizer, not a language model. Use these numbers to check the "
            "pipeline, not to judge a compactor.",
            "",
        ]
    cont = _continuation_manifest(data)
    if cont.get("proxy"):
        out += [
            f"> **Proxy agent.** Continuation metrics come from the `{cont.get('agent')}` agent: a proxy "
            "for information availability (does the compacted context still show what the next steps "
            "need?), not a model's behaviour.",
            "",
        ]
    out += [
        "This report compares compaction strategies (*arms*) replayed over the same recorded sessions. "
        f"Each candidate is compared with the baseline `{data.baseline}`; every effect is "
        "*candidate − baseline*, resampled by session (the session is the unit).",
        "",
        "Contents: " + " · ".join(f"[{t}](#{heading_anchor(t)})" for t in titles),
        "",
    ]
    return out


# --- 1. verdicts ------------------------------------------------------------------------------


def _deciding(v: dict) -> tuple[str | None, dict]:
    metrics = v.get("metrics") or {}
    name = v.get("deciding_metric")
    if name and name in metrics:
        return name, metrics[name]
    return name, {}


def section_verdicts(data: ReportData, out: Path) -> list[str]:
    verdicts = data.verdicts
    legend = "Markers: ✅ ship · ❌ drop · ❔ inconclusive · ⏸ untested."
    if not verdicts:
        candidates = [a for a in data.arms if a != data.baseline]
        why = (
            "`decision.json` has no `verdicts`"
            if "verdicts" not in data.decision
            else "`decision.json` has an empty `verdicts` table"
        )
        lines = [f"No verdicts: {why}, so the statistics stage has not judged this run."]
        if candidates:
            lines.append("Candidates without a verdict: " + ", ".join(code(c) for c in candidates) + ".")
        else:
            lines.append(
                "This run replayed only the baseline, so there is nothing to compare. `evalkit candidates` "
                "lists the arms; `evalkit run --arms baseline,<candidate>` replays one against the baseline."
            )
        return [*lines[:1], "", *lines[1:]]
    rows = []
    for cand, v in verdicts.items():
        name, m = _deciding(v)
        est = f"{num(m.get('estimate'), signed=True)} {interval(m.get('ci'))}" if m else "n/a"
        rows.append(
            [
                code(cand),
                verdict_mark(v.get("verdict")),
                code(name) if name else "none",
                est,
                str(v.get("n_sessions", "n/a")),
                escape_inline(str(v.get("reason") or "no reason recorded")),
            ]
        )
    conf = _confidence(data)
    return [
        legend,
        "",
        table(
            [
                "candidate",
                "verdict",
                "deciding metric",
                f"effect [{conf}]",
                "n sessions",
                "rule that decided",
            ],
            rows,
        ),
        "",
        "The effect is the deciding metric's *candidate − baseline* difference; the Effects section has "
        "every metric.",
    ]


# --- 2. run facts ---------------------------------------------------------------------------


def _first(d: dict, *keys: str) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return None


def _model_stat_rows(data: ReportData, standin: bool) -> list[list[str]]:
    s = data.model_stats
    if s.get("source") == "client":  # model-usage.json, counted by the client
        return usage_rows(s, standin)
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
    cfg, rc, stats = data.config, data.run_config, data.manifest.get("stats", {})
    model, replay = cfg.get("model", {}), cfg.get("replay", {})
    standin = _standin(data)
    kind = data.manifest.get("kind") or cfg.get("corpus", {}).get("kind") or "n/a"
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
    st = data.decision.get("stats") or {}
    stats_txt = (
        f"{st.get('method', 'n/a')}, {st.get('resamples', 'n/a')} resamples, alpha {st.get('alpha', 'n/a')}, "
        f"seed {st.get('seed', 'n/a')}, unit: {st.get('unit', 'n/a')}"
        if st
        else "n/a (`decision.json` has no `stats`: intervals were not computed)"
    )
    t = data.timings
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
        ["config hash", code(rc["config_hash"]) if rc.get("config_hash") else "n/a"],
    ]
    lines = [table(["fact", "value"], rows), ""]
    if rc.get("command"):
        lines += [
            "Reproduce this run (same config, same seed, same numbers):",
            "",
            *fenced("sh", rc["command"]),
        ]
    else:
        lines.append("Reproduce command: n/a (no `config.json`).")
    return lines


# --- 3. effects --------------------------------------------------------------------------------


def _metric_order(verdicts: dict) -> list[tuple[str, str, str]]:
    """(metric, role, direction), success metrics first. A metric that is some candidate's success
    metric is plotted as one (with that threshold), even where others hold it as a guardrail."""
    seen: dict[str, tuple[str, str]] = {}
    for v in verdicts.values():
        for m, d in (v.get("metrics") or {}).items():
            role, direction = str(d.get("role", "success")), str(d.get("direction", "higher"))
            if m not in seen or (role == "success" and seen[m][0] != "success"):
                seen[m] = (role, direction)
    return sorted(((m, r, d) for m, (r, d) in seen.items()), key=lambda x: (x[1] != "success", x[0]))


def _noise_interval(data: ReportData, metric: str) -> tuple[float, float] | None:
    nf = (data.decision.get("noise_floor") or {}).get(metric) or {}
    ci = nf.get("ci")
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
        return float(ci[0]), float(ci[1])
    return None


def _f(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def section_effects(data: ReportData, out: Path) -> list[str]:
    verdicts = data.verdicts
    lines: list[str] = []
    conf = _confidence(data)
    if verdicts:
        lines += [
            f"One plot per metric: each candidate's difference from the baseline with its {conf} "
            + (
                "(the clustered-SE t interval over sessions; a verdict needs it beyond the threshold as well as "
                "the paired sign-flip test). "
                if _interval_name(data) == "clustered t"
                else "(the paired sign-flip test, inverted). "
            )
            + "The dashed line is the decision threshold; the grey band, where "
            "shown, is the A/A noise floor. A point's shape and its label name the verdict.",
            "",
        ]
        plots, captions = [], []
        for metric, role, direction in _metric_order(verdicts):
            rows, threshold = [], None
            for cand, v in verdicts.items():
                m = (v.get("metrics") or {}).get(metric)
                if not m:
                    continue
                ci = m.get("ci") or [math.nan, math.nan]
                rows.append(
                    ForestRow(cand, str(v.get("verdict")), _f(m.get("estimate")), _f(ci[0]), _f(ci[1]))
                )
                # A metric can be one candidate's success metric and another's guardrail: draw
                # the threshold that belongs to the role this plot is titled with.
                if m.get("role") == role and m.get("threshold") is not None:
                    threshold = m["threshold"]
            plots.append(
                (
                    out / f"fig-effects-{slug(metric)}.png",
                    metric,
                    direction,
                    role,
                    rows,
                    _f(threshold) if threshold is not None else None,
                    _noise_interval(data, metric),
                )
            )
            better = "higher" if direction == "higher" else "lower"
            captions.append(f"{metric}: effect of each candidate vs baseline ({better} is better)")
        for fig, caption in zip(draw_all(forest_plot, plots), captions, strict=True):
            lines += [f"![{caption}]({rel_link(fig, out)})", ""]
        rows = []
        for metric, _, _ in _metric_order(verdicts):
            for cand, v in verdicts.items():
                m = (v.get("metrics") or {}).get(metric)
                if not m:
                    continue
                rows.append(
                    [
                        code(metric),
                        code(cand),
                        f"{m.get('role', 'n/a')}, {m.get('direction', 'n/a')} is better",
                        f"{num(m.get('baseline_mean'))} → {num(m.get('candidate_mean'))}",
                        f"{num(m.get('estimate'), signed=True)} {interval(m.get('ci'))}",
                        pval(m.get("p_value")),
                        pval(m.get("p_holm")),
                        num(m.get("threshold")),
                        num(m.get("mde")),
                        f"{m.get('n_sessions', 'n/a')} ({m.get('unmatched', 0)} unmatched, {m.get('errors', 0)} errors)",
                    ]
                )
        lines += [
            table(
                [
                    "metric",
                    "candidate",
                    "role",
                    "mean: baseline → candidate",
                    f"effect [{conf}, {_interval_name(data)}]",
                    "p",
                    "p (Holm)",
                    "threshold",
                    "MDE",
                    "n sessions",
                ],
                rows,
            ),
            "",
            "*p (Holm)* is adjusted for testing several metrics per candidate (n/a where the metric is not in "
            "the adjusted family). *MDE* is the true difference at which the metric's test (against its "
            "threshold) passes with the configured power; an effect below it that looks like zero is not "
            "evidence of no effect.",
            "",
        ]
    else:
        lines += [
            "No effect sizes: `decision.json` has no verdicts with per-metric estimates (the statistics "
            "stage writes them). Only the per-arm means below are available.",
            "",
        ]
    lines += _glossary(data)
    lines += _means_table(data)
    return lines


def _metric_errors(data: ReportData) -> dict[tuple[str, str], tuple[int, int]]:
    """(arm, metric) -> (errors, values), counted from the metrics table itself."""
    m = data.metrics
    if m.empty:
        return {}
    g = m.assign(err=m["error"].notna()).groupby(["arm", "metric"], observed=True)["err"].agg(["sum", "size"])
    return {(str(a), str(k)): (int(r["sum"]), int(r["size"])) for (a, k), r in g.iterrows()}


def _probe_info(metrics: list[str] | tuple[str, ...] = ()) -> dict[str, tuple[str, str, str]]:
    """metric -> (direction, what it measures, what failure it catches), from the probe registry
    and the continuation stage's own table."""
    from evalkit.continuation.metrics import metric_info
    from evalkit.probes import PROBES

    out = {}
    for e in PROBES:
        for metric, direction in e.info.get("metrics", {}).items():
            out[metric] = (str(direction), e.description, str(e.info.get("catches", "")))
    for m in metrics:
        if m not in out and (info := metric_info(m)) is not None:
            out[m] = info
    return out


def _better(direction: str) -> str:
    return f"{direction} is better" if direction in ("higher", "lower") else "neither (a count)"


def _glossary(data: ReportData) -> list[str]:
    present = sorted(set(data.metrics["metric"].astype(str))) if not data.metrics.empty else []
    info = _probe_info(present)
    rows = [
        [name(m), _better(info[m][0]), escape_inline(info[m][1]), escape_inline(info[m][2])]
        if m in info
        else [
            name(m),
            f"{_direction(data, m)} is better" if _direction(data, m) else "not recorded",
            "neither a registered probe nor a continuation metric in this install",
            "",
        ]
        for m in present
    ]
    if not rows:
        return []
    return ["### What each metric measures", "", table(["metric", "better", "measures", "catches"], rows), ""]


def _means_table(data: ReportData) -> list[str]:
    summary = list(data.decision.get("summary") or [])
    have = {(str(d.get("arm")), str(d.get("metric"))) for d in summary}
    # A metric whose every value is an error has no mean and may be absent from the summary;
    # it still belongs in the table, as errors.
    for (arm, metric), (errs, values) in _metric_errors(data).items():
        if (arm, metric) not in have and errs:
            summary.append(
                {"arm": arm, "metric": metric, "sessions": 0, "mean": None, "errors": errs, "values": values}
            )
    if not summary:
        return ["`decision.json` has no `summary` table of metric means."]
    return [
        "### Metric means per arm",
        "",
        "Mean of per-session means; n is the number of sessions with a value; errors are values a scorer "
        "could not compute (left out of the mean, never counted as zero).",
        "",
        table(
            ["metric", "arm", "n sessions", "mean", "errors"],
            [
                [
                    name(d.get("metric")),
                    name(d.get("arm")),
                    str(d.get("sessions", "n/a")),
                    num(d.get("mean")),
                    str(d.get("errors", "n/a")),
                ]
                for d in sorted(summary, key=lambda d: (str(d.get("metric")), str(d.get("arm"))))
            ],
        ),
    ]


# --- 4. compounding and size -------------------------------------------------------------------


def section_compounding(data: ReportData, out: Path) -> list[str]:
    ev = data.events
    if ev.empty:
        return ["No compaction events in this run folder (`events/*.jsonl`), so there is nothing to plot."]
    arms = [a for a in data.arms if a in set(ev["arm"])]
    replay = data.config.get("replay", {})
    window, reserve = replay.get("window"), replay.get("reserve")
    trigger = (
        100 * (window - reserve) / window
        if isinstance(window, int) and isinstance(reserve, int) and window
        else None
    )
    fig = compounding_plot(out / "fig-compounding.png", ev, arms, trigger)
    lines = [
        "A summary that re-embeds the previous one grows with every round (the seed-004 failure: stacked "
        "summaries until the context no longer fits). A healthy arm's curve stays flat; context after "
        "compaction must stay well below the window. A session is *dead* when a compaction leaves it "
        "above the window.",
        "",
        f"![Summary size and context after compaction by round, per arm]({rel_link(fig, out)})",
        "",
    ]
    rows = []
    for arm in arms:
        sub = ev[ev["arm"] == arm]
        by_round = sub.groupby("round")["summary_chars"].median()
        first, last_round = by_round.iloc[0], int(by_round.index.max())
        last = by_round.iloc[-1]
        share = 100 * sub["tokens_after"] / sub["window"].where(sub["window"] > 0)
        dead = sub.loc[sub["over_limit"], "session"].nunique()
        rows.append(
            [
                code(arm),
                str(sub["session"].nunique()),
                str(len(sub)),
                f"{first / 1e3:.1f}k → {last / 1e3:.1f}k (round {last_round})",
                f"×{last / first:.1f}" if first > 0 else "n/a",
                f"{share.median():.0f}% (max {share.max():.0f}%)",
                str(int(sub["summary_failed"].sum())),
                f"**{dead}**" if dead else "0",
            ]
        )
    lines += [
        table(
            [
                "arm",
                "sessions",
                "compactions",
                "median summary size, round 1 → last",
                "growth",
                "context after / window (median)",
                "failed summaries",
                "dead sessions",
            ],
            rows,
        ),
        "",
    ]
    counts = ev.groupby(["arm", "round"])["session"].nunique().unstack(fill_value=0)
    rounds = [int(r) for r in counts.columns]
    lines += [
        "Sessions reaching each round (later rounds rest on fewer sessions, so their medians are noisier):",
        "",
        table(
            ["arm", *[f"round {r}" for r in rounds]],
            [[code(a), *[str(int(counts.loc[a, r])) for r in rounds]] for a in arms if a in counts.index],
        ),
    ]
    return lines


# --- 5. evidence -------------------------------------------------------------------------------


def _session_means(metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    m = metrics[(metrics["metric"] == metric) & metrics["error"].isna()]
    return m.groupby(["session", "arm"], observed=True)["value"].mean().unstack("arm")


def _direction(data: ReportData, metric: str) -> str | None:
    """``higher``/``lower`` from the verdicts or the probe registry; None when nothing records it."""
    for v in data.verdicts.values():
        d = ((v.get("metrics") or {}).get(metric) or {}).get("direction")
        if d:
            return str(d)
    info = _probe_info([metric]).get(metric)
    return info[0] if info and info[0] in ("higher", "lower") else None


def _kept_lines(event: dict) -> list[str]:
    """The lines an event's new context keeps: carried texts first (the user's own words, the
    most telling evidence), then summary lines; scaffolding and duplicates left out."""
    texts = [ln for c in event.get("carried") or [] for ln in c.splitlines()]
    texts += (event.get("summary") or "").splitlines()
    out: dict[str, None] = {}
    for t in texts:
        t = t.strip()
        # Template headings and the stand-in label are in every summary: not evidence.
        if len(t) >= 16 and not t.startswith("[offline") and not t.startswith("#"):
            out.setdefault(t)
    return list(out)


def _evidence_metric(data: ReportData, cand: str) -> str | None:
    v = data.verdicts.get(cand) or {}
    if v.get("deciding_metric"):
        return str(v["deciding_metric"])
    for m, d in (v.get("metrics") or {}).items():
        if d.get("role") == "success":
            return m
    # A metric with values under both arms (an external arm has no carry or judge metrics),
    # preferring one on which some session differs: that is what the evidence shows.
    m = data.metrics[data.metrics["arm"].isin([cand, data.baseline]) & data.metrics["value"].notna()]
    arms_per = m.groupby("metric")["arm"].nunique()
    both = sorted(arms_per[arms_per == len({cand, data.baseline})].index)
    for metric in both:
        means = _session_means(m, metric)
        if cand in means and data.baseline in means and (means[cand] != means[data.baseline]).any():
            return str(metric)
    return str(both[0]) if both else None


def _evidence_for(data: ReportData, out: Path, cand: str) -> list[str]:
    base = data.baseline
    if cand not in set(data.metrics["arm"].unique()) and cand not in set(data.events["arm"].unique()):
        return [f"No events or metric values for {code(cand)} in this run folder."]
    metric = _evidence_metric(data, cand)
    if metric is None or data.metrics.empty:
        return ["No metric values for this candidate and the baseline."]
    means = _session_means(data.metrics, metric)
    if cand not in means or base not in means:
        return [f"No sessions scored on {code(metric)} under both {code(base)} and {code(cand)}."]
    both = means[[base, cand]].dropna()
    diff = (both[cand] - both[base]).sort_values(key=abs, ascending=False)
    diff = diff[diff != 0].head(EVIDENCE_SESSIONS)
    if diff.empty:
        return [f"No session differs between {code(base)} and {code(cand)} on {code(metric)}."]
    direction = _direction(data, metric)
    better = {"higher": 1, "lower": -1}.get(direction or "", 0)
    ev = data.events
    lines = [
        f"Sessions where {code(cand)} differs most from {code(base)} on {code(metric)} (mean over the "
        f"session's compactions). Quotes come from each arm's last compaction: lines one arm kept in its "
        "summary or carried texts that the other did not.",
        "",
    ]
    for session, d in diff.items():
        tag = (
            "candidate better"
            if d * better > 0
            else "candidate worse"
            if better
            else "direction not recorded"
        )
        lines.append(
            f"- Session {code(session)}: {num(both.loc[session, base])} → {num(both.loc[session, cand])} "
            f"({num(d, signed=True)}, {tag})."
        )
        last: dict[str, dict] = {}
        for arm in (base, cand):
            rows = ev[(ev["arm"] == arm) & (ev["session"] == session)]
            if rows.empty:
                continue
            r = rows.loc[rows["event"].idxmax()]
            last[arm] = {"line": int(r["line"]), "round": int(r["round"])}
        links = [
            f"{code(arm)} round {x['round']}: [events/{escape_inline(events_path(data.run_dir, arm).name)} line {x['line']}]"
            f"({rel_link(events_path(data.run_dir, arm), out)})"
            for arm, x in last.items()
        ]
        if links:
            lines.append("  - Last compaction: " + "; ".join(links) + ".")
        if len(last) == 2:
            kept = {a: _kept_lines(read_event(data.run_dir, a, last[a]["line"])) for a in (base, cand)}
            for keeper, loser in ((cand, base), (base, cand)):
                other = set(kept[loser])
                only = [t for t in kept[keeper] if t not in other][:EVIDENCE_QUOTES]
                if only:
                    quotes = "; ".join(f"“{excerpt(t)}”" for t in only)
                    lines.append(f"  - Kept by {code(keeper)}, not by {code(loser)}: {quotes}")
    return lines


def section_evidence(data: ReportData, out: Path) -> list[str]:
    cands = list(data.verdicts) or [a for a in data.arms if a != data.baseline]
    if not cands:
        return ["No candidate arms in this run: only the baseline was replayed."]
    lines: list[str] = []
    for cand in cands:
        v = data.verdicts.get(cand, {})
        head = f"### {escape_inline(cand)}"
        if v:
            head += f" ({verdict_mark(v.get('verdict'))})"
        lines += [head, "", *_evidence_for(data, out, cand), ""]
    return lines


# --- 6. noise floor ---------------------------------------------------------------------------


def section_noise(data: ReportData, out: Path) -> list[str]:
    nf = data.decision.get("noise_floor")
    if not nf:
        state = "has no `noise_floor`" if nf is None else "has an empty `noise_floor`"
        return [
            f"Not measured: `decision.json` {state}. An A/A comparison (the baseline against itself with "
            "another replicate) shows how large a difference arises from noise alone; without it, read "
            "effects near zero with care."
        ]
    rows = []
    for metric, d in sorted(nf.items()):
        ci = d.get("ci")
        width = _f(ci[1]) - _f(ci[0]) if isinstance(ci, list | tuple) and len(ci) == 2 else math.nan
        rows.append(
            [
                code(metric),
                num(d.get("aa_estimate"), signed=True),
                interval(ci),
                num(width),
                str(d.get("n_sessions", "n/a")),
            ]
        )
    note = str(data.decision.get("noise_note") or "").strip()
    return [
        "The baseline compared with itself (another replicate). A candidate's effect inside this spread is "
        "indistinguishable from re-running the baseline.",
        "",
        *([f"**{escape_inline(note.rstrip('.'))}.**", ""] if note else []),
        table(["metric", "A/A difference", f"{_confidence(data)}", "interval width", "n sessions"], rows),
    ]


# --- 7. caveats -------------------------------------------------------------------------------


def _continuation_manifest(data: ReportData) -> dict:
    """``continuation/manifest.json`` (agent, proxy flag, metrics), or {} when the run has none."""
    p = Path(data.run_dir) / "continuation" / "manifest.json"
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def caveats(data: ReportData) -> list[str]:
    """Every caveat the run itself shows, as plain sentences."""
    out: list[str] = []
    cfg, stats = data.config, data.manifest.get("stats", {})
    if _standin(data):
        out.append(
            f"**Offline stand-in model**: summaries come from `{cfg['model']['backend']}`, not a language "
            "model; effects describe the stand-in, not a real summarizer."
        )
    kind = data.manifest.get("kind") or cfg.get("corpus", {}).get("kind")
    if kind == "synth" or "synthetic" in (stats.get("formats") or {}):
        out.append(
            "**Synthetic corpus**: sessions are generated with known facts; they are realistic in shape but "
            "not recorded work, so effects may differ on real transcripts."
        )
    ns = [
        v["n_sessions"]
        for v in data.verdicts.values()
        if isinstance(v.get("n_sessions"), int) and v["n_sessions"] > 0
    ]
    n = min(ns) if ns else stats.get("sessions")
    if isinstance(n, int) and n < LOW_N:
        out.append(
            f"**Low n**: {n} sessions (< {LOW_N}); intervals are wide and the sign-flip test can only "
            f"reject when nearly every session agrees (its smallest p-value is 2^-n)."
        )
    errs = [(k, v) for k, v in sorted(_metric_errors(data).items(), key=lambda x: (x[0][1], x[0][0])) if v[0]]
    if errs:
        listed = ", ".join(f"{code(m)} on {code(a)}: {e} of {n}" for (a, m), (e, n) in errs)
        out.append(
            f"**Metrics with errors** (left out of means and effects, never counted as zero): {listed}."
        )
    if not data.events.empty and data.events["summary_failed"].any():
        by = data.events[data.events["summary_failed"]].groupby("arm").size()
        out.append(
            "**Failed summarizer calls**: "
            + ", ".join(f"{code(a)} {n}" for a, n in by.items())
            + " compactions kept no summary."
        )
    unmatched = [
        f"{code(c)}/{code(m)}: {d['unmatched']}"
        for c, v in data.verdicts.items()
        for m, d in (v.get("metrics") or {}).items()
        if isinstance(d.get("unmatched"), int) and d["unmatched"] > 0
    ]
    if unmatched:
        out.append(
            "**Unmatched sessions** (scored under one arm only, left out of paired effects): "
            + ", ".join(unmatched)
            + "."
        )
    if not data.metrics.empty:
        un = data.metrics[(data.metrics["metric"] == "unanswerable_share") & data.metrics["error"].isna()]
        if len(un) and un["value"].mean() > 0:
            per = un.groupby("arm", observed=True)["value"].mean()
            out.append(
                "**Unanswerable continuation calls**: "
                + ", ".join(f"{code(a)} {100 * x:.0f}%" for a, x in per.items())
                + " of continuation probes could not be answered from the context; continuation metrics rest "
                "on the answerable ones."
            )
        cont = _continuation_manifest(data)
        if cont.get("proxy"):
            out.append(
                f"**Proxy agent**: continuation metrics ({escape_inline(', '.join(cont.get('metrics', [])))}) "
                f"come from the {code(cont.get('agent', 'heuristic'))} agent, a deterministic stand-in that "
                "follows the recorded actions and measures whether the compacted context still shows what "
                "it needs (information availability), not how a model behaves."
            )
        elif cont:
            out.append(
                f"**Model agent**: continuation metrics come from {code(cont.get('agent', '?'))} acting in a "
                "replay environment built from the recording, not from the agent that produced the sessions."
            )
    untested = [c for c, v in data.verdicts.items() if v.get("verdict") == "untested"]
    if untested:
        out.append("**Untested candidates** (no usable data): " + ", ".join(code(c) for c in untested) + ".")
    if data.missing:
        out.append("**Missing from the run folder**: " + "; ".join(data.missing) + ".")
    for key in ("summary", "stats", "noise_floor", "verdicts"):
        if data.decision and key not in data.decision:
            out.append(f"**`decision.json` has no `{key}`** (written by an older or partial decide stage).")
    return out


def section_caveats(data: ReportData, out: Path) -> list[str]:
    found = caveats(data)
    return [f"- {c}" for c in found] if found else ["None detected."]


from evalkit.report import scorecard as _scorecard  # noqa: E402  (issue #15's sections)

SECTIONS: list[tuple[str, Callable[[ReportData, Path], list[str]]]] = [
    ("Verdicts at a glance", section_verdicts),
    ("Calibration of the rules", section_calibration),
    ("Metric health", section_health),
    ("Run facts", section_run_facts),
    ("Effects", section_effects),
    ("Compounding and size", section_compounding),
    ("Evidence per candidate", section_evidence),
    ("Scorecard: exam score vs tokens kept", _scorecard.section_scorecard),
    ("Cadence and cost per compaction", _scorecard.section_cadence),
    ("Noise floor", section_noise),
    ("Cost: planned vs actual", section_cost),
    ("Caveats", section_caveats),
]
