"""Section 1, verdicts at a glance: one line per candidate with the metric that decided it."""

from __future__ import annotations

from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import (
    code,
    interval,
    num,
    table,
)
from evalkit.report.sections.common import confidence, interval_name, verdict_mark


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
    conf = confidence(data)
    return [
        legend,
        "",
        table(
            [
                "candidate",
                "verdict",
                "deciding metric",
                f"effect [{conf}, {interval_name(data)}]",
                "n sessions",
                "rule that decided",
            ],
            rows,
        ),
        "",
        "The effect is the deciding metric's *candidate − baseline* difference; the Effects section has "
        "every metric.",
    ]
