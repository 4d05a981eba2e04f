"""Effects at a glance: one dot-and-interval chart with every candidate's effect on its deciding metric.

Deciding metrics have different units, so each effect is drawn in units of its own decision
threshold, oriented so that right is better: +1 is the min effect a success metric must clear, −1
the margin a guardrail must not cross. The raw effect is printed beside each row.
"""

from __future__ import annotations

import math
from pathlib import Path

from evalkit.contracts.records import MetricEstimate
from evalkit.report.data import ReportData
from evalkit.report.figures import VERDICT_STYLE, Dot, Panel, dot_grid
from evalkit.report.markdown import interval, num, rel_link
from evalkit.report.sections.common import as_float, confidence, interval_name

SYMLOG = 3.0  # linear within ±3 thresholds, where verdicts are decided; logarithmic beyond


def scaled(m: MetricEstimate) -> tuple[float, float, float]:
    """(estimate, lo, hi) oriented better-is-positive, in units of ``|threshold|`` (NaN without one)."""
    thr = abs(as_float(m.threshold))
    if not (math.isfinite(thr) and thr > 0):
        return math.nan, math.nan, math.nan
    sign = -1.0 if m.direction == "lower" else 1.0
    ci = m.ci or [math.nan, math.nan]
    lo, hi = sorted((sign * as_float(ci[0]) / thr, sign * as_float(ci[1]) / thr))
    return sign * as_float(m.estimate) / thr, lo, hi


def effect_panel(data: ReportData) -> Panel:
    dots, notes = {}, {}
    for cand, v in data.verdicts.items():
        metric = v.deciding_metric
        m = v.metrics.get(metric) if metric else None
        color, marker = VERDICT_STYLE.get(str(v.verdict), ("#777777", "o"))
        if not m:
            dots[cand] = Dot(math.nan, color=color, marker=marker)
            notes[cand] = "no deciding metric"
            continue
        est, lo, hi = scaled(m)
        dots[cand] = Dot(est, lo, hi, color, marker)
        notes[cand] = f"{metric} {num(m.estimate, signed=True)} {interval(m.ci)}"
    return Panel(
        "",
        "effect on the deciding metric, in units of its threshold (→ better; symmetric log beyond ±3)",
        dots,
        ((0.0, "#555555", "-"), (1.0, "#009E73", "--"), (-1.0, "#D55E00", "--")),
        notes=notes,
        symlog=SYMLOG,
    )


def section_overview(data: ReportData, out: Path) -> list[str]:
    if not data.verdicts:
        return ["No effects: `decision.json` has no verdicts."]
    present = {str(v.verdict) for v in data.verdicts.values()}
    legend = [(v, c, m, True) for v, (c, m) in VERDICT_STYLE.items() if v in present]
    fig = data.figures.draw(
        dot_grid,
        out / "fig-effects.png",
        list(data.verdicts),
        [effect_panel(data)],
        f"Each candidate's effect on its deciding metric ({confidence(data)}, {interval_name(data)})",
        legend,
    )
    return [
        f"![Each candidate's effect on its deciding metric, in units of its threshold]({rel_link(fig, out)})",
        "",
        "Green dashed: +1, the min effect a success metric must clear; red dashed: −1, the margin a "
        "guardrail must not cross. Right of the chart: the metric and its raw effect.",
    ]
