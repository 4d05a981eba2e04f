"""Report figures: PNGs 900 px wide (GitHub's reading width), Okabe–Ito colours, and shapes and
line styles that carry the same meaning as the colours, so nothing depends on colour vision.

Figures are drawn on ``matplotlib.figure.Figure`` with the Agg canvas directly (no pyplot state),
so reports can be written from worker threads and never open a window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

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


# A verdict's colour and marker (the same in every figure; the marker carries it without colour).
VERDICT_STYLE = {
    "ship": ("#009E73", "^"),
    "drop": ("#D55E00", "v"),
    "inconclusive": ("#0072B2", "o"),
    "untested": ("#999999", "X"),
}
ROW_IN = 0.24  # height of one row of a dot grid: 15 candidates stay readable at 900 px
LABEL_CHARS = 28  # longer arm names are cut (with …) so the panels keep their width


@dataclass(frozen=True)
class Dot:
    """One row's point in a panel: a value with its interval; ``filled`` False draws it hollow."""

    value: float
    lo: float = math.nan
    hi: float = math.nan
    color: str = "#0072B2"
    marker: str = "o"
    filled: bool = True
    size: float = 7.0


@dataclass(frozen=True)
class Panel:
    """One small multiple: a dot per row label, reference lines ``(x, colour, style)`` and an
    optional shaded band ``(lo, hi)`` behind the dots."""

    title: str
    xlabel: str
    dots: dict[str, Dot]
    lines: tuple[tuple[float, str, str], ...] = ()
    band: tuple[float, float] | None = None
    notes: dict[str, str] = field(default_factory=dict)  # per row, text right of the panel
    symlog: float | None = None  # linear within ±symlog, logarithmic beyond (far outliers)


def short_label(name: str, limit: int = LABEL_CHARS) -> str:
    """An arm name cut to ``limit`` characters (…) so a long one cannot squeeze the panels."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def dot_grid(
    path: Path,
    rows: list[str],
    panels: list[Panel],
    title: str,
    legend: list[tuple[str, str, str, bool]] = (),
    cols: int = 3,
) -> Path:
    """Small multiples sharing one row axis: every panel has a dot per row label (arm), so 16 arms
    need no 16 colours and a reader compares an arm across panels along its row. ``legend`` is
    (label, colour, marker, filled) entries drawn once above the panels, never over data."""
    cols = max(1, min(cols, len(panels)))
    grid_rows = math.ceil(len(panels) / cols)
    panel_h = ROW_IN * len(rows) + 1.1
    fig = Figure(
        figsize=(WIDTH_IN, panel_h * grid_rows + (0.9 if legend else 0.5)), dpi=DPI, layout="constrained"
    )
    axes = fig.subplots(grid_rows, cols, squeeze=False, sharey=True)
    ys = {r: len(rows) - 1 - i for i, r in enumerate(rows)}
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        p = panels[k]
        if p.band is not None:
            ax.axvspan(p.band[0], p.band[1], color="#DDDDDD", zorder=0)
        for x, color, style in p.lines:
            if math.isfinite(x):
                ax.axvline(x, color=color, linestyle=style, linewidth=1.2, zorder=1)
        for label, d in p.dots.items():
            if label not in ys:
                continue
            y = ys[label]
            if not math.isfinite(d.value):
                ax.text(
                    0.02,
                    y,
                    "no estimate",
                    va="center",
                    fontsize=7,
                    color="#777777",
                    transform=ax.get_yaxis_transform(),
                )
                continue
            if math.isfinite(d.lo) and math.isfinite(d.hi):
                ax.plot([d.lo, d.hi], [y, y], color=d.color, linewidth=1.6, zorder=2)
            ax.plot(
                [d.value],
                [y],
                marker=d.marker,
                markersize=d.size,
                color=d.color,
                linestyle="none",
                markerfacecolor=d.color if d.filled else "white",
                markeredgewidth=1.4,
                zorder=3,
            )
        ax.set_title(p.title, loc="left", fontsize=9)
        ax.set_xlabel(p.xlabel, fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", color="#EEEEEE")
        for y in range(len(rows)):
            if y % 2 == 0:  # banded rows guide the eye along an arm across panels
                ax.axhspan(y - 0.5, y + 0.5, color="#F6F6F6", zorder=0, linewidth=0)
        ax.margins(x=0.12)
        if p.symlog:
            ax.set_xscale("symlog", linthresh=p.symlog)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))  # 10, not 10^1
    axes[0, 0].set_yticks(list(ys.values()), [short_label(r) for r in rows], fontsize=8)
    axes[0, 0].set_ylim(-0.6, len(rows) - 0.4)
    for ax, p in zip(axes.flat, panels, strict=False):
        if p.notes:  # a twin axis's tick labels: the layout makes room for them, nothing is cut off
            right = ax.twinx()
            right.set_ylim(ax.get_ylim())
            right.set_yticks(list(ys.values()), [p.notes.get(r, "") for r in rows], fontsize=8)
            right.tick_params(length=0)
    if legend:
        handles = [
            Line2D(
                [],
                [],
                marker=m,
                color=c,
                markerfacecolor=c if f else "white",
                linestyle="none",
                markersize=7,
                label=lab,
            )
            for lab, c, m, f in legend
        ]
        fig.legend(
            handles=handles, loc="outside lower center", ncols=min(5, len(handles)), fontsize=8, frameon=False
        )
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    return _save(fig, path)


MIN_ROUND_SESSIONS = 3  # a per-round median over fewer sessions is one session's noise


def _round_medians(sub: pd.DataFrame, col: str) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Median and quartiles of ``col`` per round, over the rounds enough sessions reach."""
    counts = sub.groupby("round").size()
    g = sub[sub["round"].isin(counts.index[counts >= MIN_ROUND_SESSIONS])].groupby("round")[col]
    return g.median(), g.quantile(0.25), g.quantile(0.75)


def compounding_plot(
    path: Path, events: pd.DataFrame, arms: list[str], trigger_pct: float | None = None
) -> Path:
    """One small panel per arm: context after each compaction as a share of the window (median
    and middle half of sessions by round), the summary's own share filled beneath it, and the
    baseline's curve in grey behind every other arm. A compounding summary shows as a rising
    fill; a compaction that leaves the context above the window (a dead session) is an ×.

    Curves cover the rounds that at least :data:`MIN_ROUND_SESSIONS` sessions of the arm reach
    (a looping arm reaches round 300 in one session, which would squeeze every other panel);
    the axis says so. One panel per arm instead of one curve per arm: 16 arms in one axes need
    16 colours, which no reader tells apart."""
    ev = events.assign(
        after_share=100 * events["tokens_after"] / events["window"].where(events["window"] > 0),
        summary_share=100 * events["summary_tokens"] / events["window"].where(events["window"] > 0),
    )
    # A session is dead from its first compaction above the window: the × marks that one, and its
    # later compactions (a dead session can go on for hundreds of rounds) leave the curves.
    died = ev[ev["over_limit"].astype(bool)].groupby(["arm", "session"])["round"].min().rename("died")
    ev = ev.join(died, on=["arm", "session"])
    ev = ev[ev["died"].isna() | (ev["round"] <= ev["died"])]
    shown = [a for a in arms if (ev["arm"] == a).any()]
    cols = min(4, max(1, len(shown)))
    grid_rows = math.ceil(len(shown) / cols)
    fig = Figure(figsize=(WIDTH_IN, 0.9 + 2.0 * grid_rows), dpi=DPI, layout="constrained")
    axes = fig.subplots(grid_rows, cols, squeeze=False, sharex=True, sharey=True)
    # Every panel's limits are set below: autoscaling 20 shared axes after each curve only costs.
    for ax in axes.flat:
        ax.set_autoscale_on(False)
    base = shown[0] if shown else None
    base_med = _round_medians(ev[ev["arm"] == base], "after_share")[0] if base else pd.Series(dtype=float)
    last = 1
    # Every plotted value fits, the deaths included (a death far above the window is clipped at 3x).
    top = min(300.0, max(105.0, 1.05 * float(ev["after_share"].max() or 0)))
    for k, ax in enumerate(axes.flat):
        if k >= len(shown):
            ax.set_visible(False)
            continue
        arm = shown[k]
        sub = ev[ev["arm"] == arm]
        med, q1, q3 = _round_medians(sub, "after_share")
        smed = _round_medians(sub, "summary_share")[0]
        if len(med):
            last = max(last, int(med.index.max()))
        if arm != base and len(base_med):
            ax.plot(base_med.index, base_med.values, color="#999999", linewidth=1.4, linestyle="--")
        ax.fill_between(med.index, q1.values, q3.values, color="#0072B2", alpha=0.18, linewidth=0)
        ax.plot(med.index, med.values, color="#0072B2", linewidth=2)
        ax.fill_between(smed.index, 0, smed.values, color="#E69F00", alpha=0.55, linewidth=0)
        ax.axhline(100, color="#000000", linewidth=1)
        if trigger_pct is not None:
            ax.axhline(trigger_pct, color="#D55E00", linestyle=":", linewidth=1.2)
        dead = sub[sub["round"] == sub["died"]]
        if not dead.empty:
            ax.scatter(
                dead["round"],
                dead["after_share"].clip(upper=top),
                marker="x",
                s=40,
                linewidths=1.5,
                color="#D55E00",
                zorder=5,
            )
        n_dead = dead["session"].nunique()
        ax.set_title(short_label(arm, 24) + (f"  ({n_dead} dead)" if n_dead else ""), loc="left", fontsize=9)
        ax.grid(color="#EEEEEE")
        ax.tick_params(labelsize=8)
    for ax in axes.flat:
        ax.set_ylim(0, top)
        ax.set_xlim(0.5, last + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
    fig.supylabel("% of the window", fontsize=9)
    fig.supxlabel(
        f"compaction round (rounds reached by at least {MIN_ROUND_SESSIONS} sessions of the arm)", fontsize=9
    )
    handles = [
        Line2D(
            [], [], color="#0072B2", linewidth=2, label="context after compaction (median; band: middle half)"
        ),
        Patch(color="#E69F00", alpha=0.55, label="of which the summary"),
        Line2D([], [], color="#999999", linestyle="--", label=f"{base} context after (reference)"),
        Line2D([], [], color="#000000", linewidth=1, label="window"),
        *(
            [Line2D([], [], color="#D55E00", linestyle=":", label="compaction trigger")]
            if trigger_pct
            else []
        ),
        Line2D([], [], color="#D55E00", marker="x", linestyle="none", label="left above the window (dead)"),
    ]
    fig.legend(handles=handles, loc="outside upper center", ncols=3, fontsize=8, frameon=False)
    return _save(fig, path)
