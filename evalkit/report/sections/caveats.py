"""Section 7, caveats: what limits the run's conclusions (stand-ins, small n, errors, missing inputs)."""

from __future__ import annotations

from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import (
    code,
)
from evalkit.report.sections.common import LOW_N, continuation_manifest, is_standin, metric_errors


def caveats(data: ReportData) -> list[str]:
    """Every caveat the run itself shows, as plain sentences."""
    out: list[str] = []
    cfg, stats = data.config, data.manifest.stats
    if is_standin(data):
        out.append(
            f"**Offline stand-in model**: summaries come from `{cfg['model']['backend']}`, not a language "
            "model; effects describe the stand-in, not a real summarizer."
        )
    kind = data.manifest.kind or cfg.get("corpus", {}).get("kind")
    if kind == "synth" or "synthetic" in (stats.get("formats") or {}):
        out.append(
            "**Synthetic corpus**: sessions are generated with known facts; they are realistic in shape but "
            "not recorded work, so effects may differ on real transcripts."
        )
    ns = [v.n_sessions for v in data.verdicts.values() if isinstance(v.n_sessions, int) and v.n_sessions > 0]
    n = min(ns) if ns else stats.get("sessions")
    if isinstance(n, int) and n < LOW_N:
        out.append(
            f"**Low n**: {n} sessions (< {LOW_N}); intervals are wide and the sign-flip test can only "
            f"reject when nearly every session agrees (its smallest p-value is 2^-n)."
        )
    counted = metric_errors(data, fold_questions=True)
    errs = [(k, v) for k, v in sorted(counted.items(), key=lambda x: (x[0][1], x[0][0])) if v[0]]
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
        f"{code(c)}/{code(m)}: {d.unmatched}"
        for c, v in data.verdicts.items()
        for m, d in v.metrics.items()
        if isinstance(d.unmatched, int) and d.unmatched > 0
    ]
    if unmatched:
        out.append(
            "**Unmatched sessions** (scored under one arm only, left out of paired effects): "
            + ", ".join(unmatched)
            + "."
        )
    if not data.metrics.empty:
        un = data.metrics[(data.metrics["metric"] == "unanswerable_share") & data.metrics["error"].isna()]
        if (
            len(un) and un["sum"].sum() > 0
        ):  # a mean over continuation calls, from each session's sum and count
            g = un.groupby("arm", observed=True)[["sum", "n"]].sum()
            per = g["sum"] / g["n"]
            out.append(
                "**Unanswerable continuation calls**: "
                + ", ".join(f"{code(a)} {100 * x:.0f}%" for a, x in per.items())
                + " of continuation probes could not be answered from the context; continuation metrics rest "
                "on the answerable ones."
            )
        cont = continuation_manifest(data)
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
    untested = [c for c, v in data.verdicts.items() if v.verdict == "untested"]
    if untested:
        out.append("**Untested candidates** (no usable data): " + ", ".join(code(c) for c in untested) + ".")
    if data.missing:
        out.append("**Missing from the run folder**: " + "; ".join(data.missing) + ".")
    for key in ("stats", "noise_floor", "verdicts"):
        if data.decided and key not in data.decision.model_fields_set:
            out.append(f"**`decision.json` has no `{key}`** (written by an older or partial decide stage).")
    return out


def section_caveats(data: ReportData, out: Path) -> list[str]:
    found = caveats(data)
    return [f"- {c}" for c in found] if found else ["None detected."]
