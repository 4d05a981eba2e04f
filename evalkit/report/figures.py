"""Report figures: PNGs 900 px wide (GitHub's reading width), Okabe–Ito colours, and shapes and
line styles that carry the same meaning as the colours, so nothing depends on colour vision.

Figures are drawn on ``matplotlib.figure.Figure`` with the Agg canvas directly (no pyplot state),
so reports can be written from worker threads and never open a window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

# Okabe & Ito (2008), "Color Universal Design": distinguishable under common colour-vision deficiencies.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 1)), (0, (1, 1)), (0, (8, 2))]
WIDTH_IN, DPI = 9.0, 100  # 900 px
VERDICT_MARKERS = {"ship": "^", "drop": "v", "inconclusive": "o", "untested": "x"}


def arm_style(i: int) -> dict:
    """Colour, marker and line style of the i-th arm (the baseline is arm 0)."""
    return {
        "color": OKABE_ITO[i % len(OKABE_ITO)],
        "marker": MARKERS[i % len(MARKERS)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
    }


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI, facecolor="white")
    return path


@dataclass(frozen=True)
class ForestRow:
    """One candidate's effect on one metric (candidate − baseline)."""

    candidate: str
    verdict: str
    estimate: float
    lo: float
    hi: float


def forest_plot(
    path: Path,
    metric: str,
    direction: str,
    role: str,
    rows: list[ForestRow],
    threshold: float | None,
    noise: tuple[float, float] | None = None,
) -> Path:
    """Candidate deltas vs the baseline with intervals; the decision threshold and the A/A noise band drawn."""
    n = len(rows)
    fig = Figure(figsize=(WIDTH_IN, max(3.0, 1.6 + 0.55 * n)), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ys = np.arange(n)[::-1]
    if noise is not None:
        ax.axvspan(noise[0], noise[1], color="#DDDDDD", zorder=0, label="A/A noise floor (interval)")
    ax.axvline(0, color="#555555", linewidth=1, label="no difference")
    if threshold is not None and math.isfinite(threshold):
        better = 1 if direction == "higher" else -1
        # Success metrics must clear the threshold in the better direction; guardrails must not
        # cross it in the worse direction.
        x = abs(threshold) * (better if role == "success" else -better)
        label = "ship threshold" if role == "success" else "guardrail limit (harm)"
        ax.axvline(x, color="#D55E00", linestyle="--", linewidth=1.5, label=label)
    seen: set[str] = set()
    for y, r in zip(ys, rows, strict=True):
        if not (math.isfinite(r.estimate) and math.isfinite(r.lo) and math.isfinite(r.hi)):
            ax.text(0, y, "  no estimate", va="center", fontsize=9)
            continue
        m = VERDICT_MARKERS.get(r.verdict, "o")
        ax.errorbar(
            r.estimate,
            y,
            xerr=[[r.estimate - r.lo], [r.hi - r.estimate]],
            fmt=m,
            color="#0072B2",
            markersize=8,
            capsize=4,
            linewidth=1.8,
            label=f"{r.verdict} (estimate, interval)" if r.verdict not in seen else None,
        )
        seen.add(r.verdict)
    ax.set_yticks(ys, [f"{r.candidate}\n[{r.verdict}]" for r in rows])
    ax.set_ylim(-0.7, n - 0.3)
    arrow = "→ higher is better" if direction == "higher" else "← lower is better"
    ax.set_xlabel(f"{metric}: candidate − baseline (metric units; {arrow})")
    ax.set_title(f"{metric} ({role}): effect vs baseline", loc="left", fontsize=11)
    ax.grid(axis="x", color="#EEEEEE")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return _save(fig, path)


MIN_ROUND_SESSIONS = 3  # a per-round median over fewer sessions is one session's noise


def compounding_plot(
    path: Path, events: pd.DataFrame, arms: list[str], trigger_pct: float | None = None
) -> Path:
    """Top: summary size by compaction round (median and quartiles). Bottom: context after
    compaction as a share of the window, so a compounding summary shows as a rising curve; a
    compaction that leaves the context above the window (a dead session) is marked with an ×.

    Curves cover the rounds that at least :data:`MIN_ROUND_SESSIONS` sessions of the arm reach
    (a looping arm reaches round 300 in one session, which would squeeze every other curve into
    the left edge); the axis says so. One legend names each arm once."""
    fig = Figure(figsize=(WIDTH_IN, 7.0), dpi=DPI, layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    ev = events.assign(
        after_share=100 * events["tokens_after"] / events["window"].where(events["window"] > 0)
    )
    # Arms often coincide (a candidate equal to the baseline on size); a small sideways offset per
    # arm keeps every marker visible.
    dodge = 0.08
    last = 1
    handles = []
    for i, arm in enumerate(arms):
        sub = ev[ev["arm"] == arm]
        if sub.empty:
            continue
        st = arm_style(i)
        off = (i - (len(arms) - 1) / 2) * dodge
        counts = sub.groupby("round").size()
        shown = counts.index[counts >= MIN_ROUND_SESSIONS]
        if len(shown):
            last = max(last, int(shown.max()))
        for ax, col, scale in ((top, "summary_chars", 1e-3), (bottom, "after_share", 1.0)):
            g = sub[sub["round"].isin(shown)].groupby("round")[col]
            med, q1, q3 = g.median() * scale, g.quantile(0.25) * scale, g.quantile(0.75) * scale
            x = med.index.to_numpy(dtype=float) + off
            (line,) = ax.plot(x, med.values, label=arm, linewidth=2, markersize=5, **st)
            ax.fill_between(x, q1.values, q3.values, color=st["color"], alpha=0.15, linewidth=0)
        handles.append(line)
        dead = sub[sub["over_limit"]]
        if not dead.empty:
            bottom.scatter(
                dead["round"] + off,
                dead["after_share"],
                marker="x",
                s=50,
                linewidths=1.5,
                color=st["color"],
                zorder=5,
            )
    top.set_ylabel("summary size (thousand chars)")
    top.set_title(
        "Summary size by compaction round (median; band: middle 50% of sessions)", loc="left", fontsize=11
    )
    handles.append(bottom.axhline(100, color="#000000", linestyle="-", linewidth=1, label="window (100%)"))
    if trigger_pct is not None:
        handles.append(
            bottom.axhline(
                trigger_pct, color="#D55E00", linestyle="--", linewidth=1.2, label="compaction trigger"
            )
        )
    handles.append(
        bottom.scatter(
            [], [], marker="x", s=50, linewidths=1.5, color="#000000", label="over the window (dead)"
        )
    )
    bottom.set_ylabel("context after compaction (% of window)")
    bottom.set_xlabel(
        f"compaction round (rounds reached by at least {MIN_ROUND_SESSIONS} sessions of an arm)"
    )
    bottom.set_title("Context left after each compaction", loc="left", fontsize=11)
    bottom.set_ylim(0, max(105.0, float(ev["after_share"].max() or 0) * 1.05))
    top.set_ylim(bottom=0)
    bottom.set_xlim(0.5, last + 0.5)
    # Integer rounds, but not one tick per round: a label per round is unreadable at 40 rounds.
    bottom.xaxis.set_major_locator(MaxNLocator(nbins=12, integer=True))
    top.tick_params(labelbottom=True)
    for ax in (top, bottom):
        ax.grid(color="#EEEEEE")
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
    return _save(fig, path)
