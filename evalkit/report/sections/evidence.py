"""Section 5, evidence per candidate: the sessions where the deciding metric moved most, with what was kept."""

from __future__ import annotations

from pathlib import Path

from evalkit.contracts.event import events_path
from evalkit.report.data import ReportData, read_event
from evalkit.report.escape import escape_inline, excerpt
from evalkit.report.markdown import (
    code,
    num,
    rel_link,
)
from evalkit.report.sections.common import metric_direction, session_means, verdict_mark

EVIDENCE_SESSIONS = 3


EVIDENCE_QUOTES = 3


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
    base = data.baseline
    m = data.metrics[data.metrics["arm"].isin([cand, base]) & data.metrics["value"].notna()]
    arms_per = m.groupby("metric", observed=True)["arm"].nunique()
    both = sorted(arms_per[arms_per == len({cand, base})].index)
    if cand != base:
        # One group-by for every metric, not one filter per metric: a run without a deciding
        # metric can have hundreds (one per exam question), and the loop was most of its report.
        ok = m[m["error"].isna()]
        means = ok.groupby(["metric", "session", "arm"], observed=True)["value"].mean().unstack("arm")
        if cand in means and base in means:
            # a session scored under one arm only differs (NaN != value), as in session_means
            differs = (means[cand] != means[base]).groupby(level="metric", observed=True).any()
            scored = ok.groupby("metric", observed=True)["arm"].nunique()
            for metric in both:
                if scored.get(metric, 0) == 2 and differs.get(metric, False):
                    return str(metric)
    return str(both[0]) if both else None


def _evidence_for(data: ReportData, out: Path, cand: str) -> list[str]:
    base = data.baseline
    if cand not in set(data.metrics["arm"].unique()) and cand not in set(data.events["arm"].unique()):
        return [f"No events or metric values for {code(cand)} in this run folder."]
    metric = _evidence_metric(data, cand)
    if metric is None or data.metrics.empty:
        return ["No metric values for this candidate and the baseline."]
    means = session_means(data.metrics, metric)
    if cand not in means or base not in means:
        return [f"No sessions scored on {code(metric)} under both {code(base)} and {code(cand)}."]
    both = means[[base, cand]].dropna()
    diff = (both[cand] - both[base]).sort_values(key=abs, ascending=False)
    diff = diff[diff != 0].head(EVIDENCE_SESSIONS)
    if diff.empty:
        return [f"No session differs between {code(base)} and {code(cand)} on {code(metric)}."]
    direction = metric_direction(data, metric)
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
