"""Section 5, evidence per candidate: the sessions where the deciding metric moved most, with what was kept."""

from __future__ import annotations

from pathlib import Path

from evalkit.report.data import ReportData, read_event
from evalkit.report.escape import escape_inline, excerpt
from evalkit.report.markdown import (
    code,
    num,
    rel_link,
    table,
)
from evalkit.report.sections.common import metric_direction, session_means, verdict_mark

EVIDENCE_SESSIONS = 3
EVIDENCE_QUOTES = 1  # per session and side


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
    v = data.verdicts.get(cand)
    if v is not None and v.deciding_metric:
        return str(v.deciding_metric)
    for m, d in v.metrics.items() if v is not None else ():
        if d.role == "success":
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


def viewer_link(data: ReportData, out: Path, **where: str) -> str | None:
    """A link destination into the run's viewer (``evalkit view``) at ``where`` (candidate,
    session, event), or None when the run folder has no viewer yet."""
    from urllib.parse import urlencode

    from evalkit.report.view import VIEW_DIR

    index = Path(data.run_dir) / VIEW_DIR / "index.html"
    if not index.is_file():
        return None
    dest = rel_link(index, out)
    frag = "#" + urlencode(where) if where else ""
    return f"<{dest.strip('<>')}{frag}>" if dest.startswith("<") else dest + frag


def _top_sessions(data: ReportData, cand: str, metric: str):
    """(session, baseline value, candidate value, difference) where the arms differ most on ``metric``."""
    means = session_means(data.metrics, metric)
    base = data.baseline
    if cand not in means or base not in means:
        return []
    both = means[[base, cand]].dropna()
    diff = (both[cand] - both[base]).sort_values(key=abs, ascending=False)
    diff = diff[diff != 0].head(EVIDENCE_SESSIONS)
    return [(s, both.loc[s, base], both.loc[s, cand], d) for s, d in diff.items()]


def _last_event(data: ReportData, arm: str, session: str) -> dict | None:
    rows = data.events[(data.events["arm"] == arm) & (data.events["session"] == session)]
    if rows.empty:
        return None
    return read_event(data.run_dir, arm, int(rows.loc[rows["event"].idxmax(), "line"]))


def _evidence_row(data: ReportData, out: Path, cand: str) -> list[str]:
    base = data.baseline
    v = data.verdicts.get(cand)
    head = [code(cand), verdict_mark(v.verdict) if v is not None else "–"]
    if cand not in set(data.metrics["arm"].unique()) and cand not in set(data.events["arm"].unique()):
        return [*head, "–", "no events or metric values for this candidate", "", ""]
    metric = _evidence_metric(data, cand)
    top = _top_sessions(data, cand, metric) if metric and not data.metrics.empty else []
    if not top:
        why = f"no session differs on {code(metric)}" if metric else "no metric under both arms"
        return [*head, code(metric) if metric else "–", why, "", ""]
    better = {"higher": 1, "lower": -1}.get(metric_direction(data, metric) or "", 0)
    sessions = []
    for s, b, c, d in top:
        tag = "" if not better else (" better" if d * better > 0 else " worse")
        text = f"{code(s)} {num(b)} → {num(c)}{tag}"
        link = viewer_link(data, out, cand=cand, s=str(s))
        sessions.append(f"[{text}]({link})" if link else text)
    # From each session's last compaction, the first line one arm kept and the other did not.
    quotes: list[list[str]] = [[], []]
    for sess, *_ in top:
        last = {a: _last_event(data, a, sess) for a in (base, cand)}
        if not all(last.values()):
            continue
        kept = {a: _kept_lines(e) for a, e in last.items()}
        for k, (keeper, loser) in enumerate(((cand, base), (base, cand))):
            only = [t for t in kept[keeper] if t not in set(kept[loser])][:EVIDENCE_QUOTES]
            quotes[k] += [f"{code(sess)}: “{excerpt(t)}”" for t in only]
    return [*head, code(metric), "; ".join(sessions), *["; ".join(q) for q in quotes]]


def section_evidence(data: ReportData, out: Path) -> list[str]:
    cands = list(data.verdicts) or [a for a in data.arms if a != data.baseline]
    if not cands:
        return ["No candidate arms in this run: only the baseline was replayed."]
    base = data.baseline
    linked = viewer_link(data, out) is not None
    return [
        f"Per candidate, the sessions where it differs most from {code(base)} on its deciding metric (mean over "
        "the session's compactions), and from each one's last compaction a line one arm kept (summary "
        "or carried texts) that the other did not. "
        + (
            "Each session opens in the viewer, compaction by compaction, side by side."
            if linked
            else f"`evalkit view {escape_inline(str(data.run_dir))}` writes a viewer these sessions then link to."
        ),
        "",
        table(
            [
                "candidate",
                "verdict",
                "metric",
                "sessions: baseline → candidate",
                "kept only by the candidate",
                f"kept only by {code(base)}",
            ],
            [_evidence_row(data, out, c) for c in cands],
        ),
    ]
