"""Effects at a glance: one figure with every candidate's effect on each deciding metric."""

from __future__ import annotations

import math
from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.figures import VERDICT_STYLE, Dot, Panel, dot_grid
from evalkit.report.markdown import rel_link
from evalkit.report.sections.common import as_float, confidence, interval_name

MAX_PANELS = 6  # more deciding metrics than this: the Effects per metric table has the rest


def deciding_metrics(verdicts: dict) -> list[str]:
    """The metrics that decided some verdict, most verdicts first; the success metrics when none did."""
    count: dict[str, int] = {}
    for v in verdicts.values():
        if v.get("deciding_metric"):
            count[v["deciding_metric"]] = count.get(v["deciding_metric"], 0) + 1
    if not count:
        for v in verdicts.values():
            for m, d in (v.get("metrics") or {}).items():
                if d.get("role") == "success":
                    count.setdefault(m, 0)
    return sorted(count, key=lambda m: (-count[m], m))


def _noise(data: ReportData, metric: str) -> tuple[float, float] | None:
    ci = ((data.decision.get("noise_floor") or {}).get(metric) or {}).get("ci")
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
        return float(ci[0]), float(ci[1])
    return None


def effect_panel(data: ReportData, metric: str) -> Panel:
    """One metric's panel: a dot per candidate coloured by its verdict, filled where this metric
    decided it; zero, the thresholds and the A/A noise floor behind."""
    dots, lines, direction = {}, [(0.0, "#555555", "-")], "higher"
    for cand, v in data.verdicts.items():
        m = (v.get("metrics") or {}).get(metric)
        if not m:
            continue
        direction = str(m.get("direction", direction))
        color, marker = VERDICT_STYLE.get(str(v.get("verdict")), ("#777777", "o"))
        ci = m.get("ci") or [math.nan, math.nan]
        dots[cand] = Dot(
            as_float(m.get("estimate")),
            as_float(ci[0]),
            as_float(ci[1]),
            color,
            marker,
            filled=v.get("deciding_metric") == metric,
        )
        thr = as_float(m.get("threshold"))
        if math.isfinite(thr) and all(abs(x - thr) > 1e-12 for x, _, _ in lines):
            lines.append((thr, "#009E73" if m.get("role") == "success" else "#D55E00", "--"))
    arrow = "→ higher is better" if direction == "higher" else "← lower is better"
    return Panel(metric, f"candidate − baseline ({arrow})", dots, tuple(lines), _noise(data, metric))


def section_overview(data: ReportData, out: Path) -> list[str]:
    if not data.verdicts:
        return ["No effects: `decision.json` has no verdicts."]
    metrics = deciding_metrics(data.verdicts)[:MAX_PANELS]
    if not metrics:
        return ["No effects: no verdict has a deciding or success metric."]
    panels = [effect_panel(data, m) for m in metrics]
    cands = [c for c in data.verdicts if any(c in p.dots for p in panels)]
    present = {str(v.get("verdict")) for v in data.verdicts.values()}
    legend = [(v, c, m, True) for v, (c, m) in VERDICT_STYLE.items() if v in present]
    legend.append(("hollow: metric did not decide it", "#555555", "o", False))
    fig = data.figures.draw(
        dot_grid,
        out / "fig-effects.png",
        cands,
        panels,
        f"Effect of each candidate on its deciding metric ({confidence(data)}, {interval_name(data)})",
        legend,
    )
    return [
        f"![Each candidate's effect on each deciding metric, coloured by verdict]({rel_link(fig, out)})",
        "",
        "Dashed lines: the ship threshold (green) and the guardrail margin (red); grey band: the A/A noise floor.",
    ]
