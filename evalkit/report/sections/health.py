"""The report's "Metric health" section: which metrics cannot measure anything in this run, and
which verdicts rest on one (from ``health.json``, written before the decide stage)."""

from __future__ import annotations

from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import code, merge_same_rows, table


def section_health(data: ReportData, out: Path) -> list[str]:
    """Unhealthy metrics, verdicts resting on them, arms identical to the baseline, shared code."""
    h = data.health.model_dump(exclude_unset=True) if data.health is not None else None
    if h is None:
        return ["No `health.json` in this run folder: the metric-health check did not run (older run?)."]
    lines = [
        "Checked before deciding: a metric constant across every arm and session, constant by "
        "construction for this backend/agent/settings, or able to invert under a proxy agent cannot "
        "support a verdict; neither can an arm whose values equal the baseline's in every session.",
        "",
    ]
    bad = [(k, v["unhealthy"]) for k, v in sorted(h.get("metrics", {}).items()) if v.get("unhealthy")]
    if bad:
        lines.append(
            table(
                ["metric", "why it cannot support a verdict"],
                merge_same_rows([[code(k), escape_inline("; ".join(r))] for k, r in bad], sep=", "),
            )
        )
    else:
        lines.append("Every metric varies in this run.")
    lines.append("")
    exams = h.get("exams", {})
    if exams:  # every exam's ceiling against its floor (evalkit.score.examcheck)
        lines += [
            "**Exams: does the ceiling beat the floor?** (`uncompacted` vs `no-history`, paired by question; "
            "an unusable exam supports no verdict)",
            "",
            table(
                ["exam", "usable", "check"],
                [
                    [
                        k,
                        "yes"
                        if v["usable"]
                        else "n/a"
                        if v["reason"] == "not asked in this run"
                        else "**no**",
                        escape_inline(v["reason"]),
                    ]
                    for k, v in sorted(exams.items())
                ],
            ),
            "",
        ]
    notes = h.get("verdict_notes", {})
    rows = []
    for arm, ns in sorted(notes.items()):
        v = data.verdicts.get(arm)
        rows.append([code(arm), str(v.verdict) if v is not None else "n/a", escape_inline(" · ".join(ns))])
    if rows:
        lines.append(
            "**Verdicts that rest on an unhealthy metric** (success metrics and guardrails, per candidate):"
        )
        lines.append("")
        lines.append(table(["candidate", "verdict", "unhealthy metrics it rests on"], rows))
    else:
        lines.append("No verdict rests on an unhealthy metric.")
    shared = h.get("shares_code", {})
    lines.append("")
    if shared:
        lines.append(
            "**Candidates sharing code with the ground truth or the probes** (their scores may be partly "
            "the grader's own patterns):"
        )
        lines.append("")
        lines.append(
            table(
                ["candidate", "shared code"],
                [[code(a), escape_inline("; ".join(n))] for a, n in sorted(shared.items())],
            )
        )
    else:
        lines.append("No candidate's code imports the ground truth or the probes.")
    return lines
