"""The verdicts: one line per candidate with what decided it (metric, effect, interval, p, n)."""

from __future__ import annotations

from pathlib import Path

from evalkit.contracts.records import MetricEstimate, Verdict
from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import code, interval, num, pval, table
from evalkit.report.sections.common import confidence, interval_name, verdict_mark


def deciding(v: Verdict) -> tuple[str | None, MetricEstimate | None]:
    """The verdict's deciding metric and its per-metric result (None when it has none)."""
    name = v.deciding_metric
    return name, v.metrics.get(name) if name else None


def deciding_p(v: Verdict) -> str:
    """The p-value of the test that decided the verdict, with the test's name; ``n/a`` when no
    test decided it (untested, a guardrail with too few sessions) or the decision predates
    ``deciding_p``. Never a metric's other p-value: that belongs to another test."""
    if "deciding_p" not in v.model_fields_set:
        return "n/a (decision.json predates `deciding_p`)"
    if v.deciding_p is None:
        return "none"
    return f"{pval(v.deciding_p)} ({escape_inline(str(v.deciding_test or 'test'))})"


def section_verdicts(data: ReportData, out: Path) -> list[str]:
    verdicts = data.verdicts
    if not verdicts:
        candidates = [a for a in data.arms if a != data.baseline]
        why = (
            "`decision.json` has no `verdicts`"
            if "verdicts" not in data.decision.model_fields_set
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
        name, m = deciding(v)
        rows.append(
            [
                code(cand),
                verdict_mark(v.verdict),
                code(name) if name else "none",
                f"{num(m.estimate, signed=True)} {interval(m.ci)}" if m else "n/a",
                deciding_p(v),
                str(v.n_sessions) if "n_sessions" in v.model_fields_set else "n/a",
                escape_inline(str(v.reason or "no reason recorded")),
            ]
        )
    conf = f"{confidence(data)}, {interval_name(data)}"
    return [
        table(
            ["candidate", "verdict", "deciding metric", f"effect [{conf}]", "p (deciding test)", "n", "rule"],
            rows,
        ),
        "",
        "Effect: the deciding metric's *candidate − baseline*; p: the test the rule cites. "
        "✅ ship · ❌ drop · ❔ inconclusive · ⏸ untested.",
    ]
