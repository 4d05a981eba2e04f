"""The scorecard (issue #15): per arm, exam score and identifier recall against tokens kept.

Reported the way the field now reports compaction (hermes-agent's compaction eval): each arm's
exam score next to the tokens it kept after compaction, the uncompacted ceiling as the 100%
reference, per-question paired win/loss/tie counts against the baseline, and the exam's noise
(the A/A arm's spread, and the binomial error of a k-question exam). The cadence and cost per
compaction are in :mod:`evalkit.report.sections.cadence`.

Scores are shares in 0..1 shown as %: the generated exam (``judge_offline_overall`` or
``judge_overall``, 0–5, divided by 5), the probe-bank exam (``exam_offline`` / ``exam``) and
``identifier_recall``. Each is a mean of per-session means with a 95% t interval over sessions.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from evalkit.contracts.metrics_sessions import arm_summary, valued_rows
from evalkit.report.data import ReportData
from evalkit.report.figures import DPI, WIDTH_IN, _save, arm_style
from evalkit.report.markdown import code, rel_link, table

CEILING = "uncompacted"
AA = "aa"
# (label, [(metric, scale)]): the first metric present in the run is used.
SCORES = [
    ("generated exam", [("judge_overall", 5.0), ("judge_offline_overall", 5.0)]),
    ("bank exam", [("exam", 1.0), ("exam_offline", 1.0)]),
    ("identifier recall", [("identifier_recall", 1.0)]),
    ("identifier exam", [("identifier_exam", 1.0)]),
]
# Per-question metrics (one row per question per event): the paired win/loss/tie count.
QUESTION_PREFIXES = [
    ("generated exam", ("judge_q:", "judge_offline_q:")),
    ("bank exam", ("exam_q:", "exam_offline_q:")),
    ("identifier exam", ("identifier_q:",)),
]


def _pick(metrics: pd.DataFrame, options: list[tuple[str, float]]) -> tuple[str, float] | None:
    present = set(metrics["metric"].unique()) if len(metrics) else set()
    return next(((m, s) for m, s in options if m in present), None)


def question_grades(metrics: pd.DataFrame, prefixes: tuple[str, ...]) -> pd.DataFrame:
    """(arm, session, question) → mean grade over the events where it was asked."""
    for p in prefixes:
        q = valued_rows(metrics, metrics["metric"].str.startswith(p)) if len(metrics) else metrics
        if len(q):
            return q.groupby(["arm", "session", "metric"], observed=True)["value"].mean().reset_index()
    return pd.DataFrame(columns=["arm", "session", "metric", "value"])


def win_loss_tie(grades: pd.DataFrame, arm: str, baseline: str) -> tuple[int, int, int]:
    """Paired per (session, question): the arm's grade above, below or equal to the baseline's."""
    a = grades[grades["arm"] == arm].set_index(["session", "metric"])["value"]
    b = grades[grades["arm"] == baseline].set_index(["session", "metric"])["value"]
    d = (a - b).dropna()
    eps = 1e-9
    return int((d > eps).sum()), int((d < -eps).sum()), int((d.abs() <= eps).sum())


def binomial_error(p: float, k: int) -> float:
    """One standard error, in points of %, of a k-question exam scoring p."""
    return 100 * math.sqrt(p * (1 - p) / k) if k > 0 and 0 <= p <= 1 else math.nan


def _pct(x: float, half: float = math.nan) -> str:
    if not math.isfinite(x):
        return "–"
    return f"{100 * x:.1f}%" + (f" ± {100 * half:.1f}" if math.isfinite(half) else "")


def scorecard_plot(
    path: Path, panels: list[tuple[str, pd.DataFrame]], arms: list[str], baseline: str
) -> Path:
    """One panel per score: each arm a point (tokens kept, score) with its interval; the ceiling
    arm is a black star with a dotted line at its score."""
    # Panels share the height of a tall screen (at most 12 in) however many exam families there are.
    panel_in = min(3.6, 11.4 / len(panels))
    fig = Figure(figsize=(WIDTH_IN, panel_in * len(panels) + 0.6), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True)[:, 0]
    for k, (ax, (label, rows)) in enumerate(zip(axes, panels, strict=True)):
        xs = [rows.loc[a, "tokens"] for a in arms if a in rows.index and math.isfinite(rows.loc[a, "tokens"])]
        xspan = (max(xs) - min(xs)) if len(xs) > 1 else 1.0
        ys = [
            100 * rows.loc[a, "score"]
            for a in arms
            if a in rows.index and math.isfinite(rows.loc[a, "score"])
        ]
        yspan = (max(ys) - min(ys)) if len(ys) > 1 else 1.0
        labels: list = []
        for i, arm in enumerate(arms):
            if arm not in rows.index or not math.isfinite(rows.loc[arm, "tokens"]):
                continue
            r = rows.loc[arm]
            st = arm_style(i)
            ceiling = arm == CEILING
            # A t interval on a few sessions can pass 0% or 100%; a share cannot: draw it clipped.
            half, score = r["half"], r["score"]
            yerr = [[100 * min(half, score)], [100 * min(half, 1 - score)]] if math.isfinite(half) else None
            ax.errorbar(
                r["tokens"],
                100 * r["score"],
                yerr=yerr,
                fmt="*" if ceiling else st["marker"],
                color="#000000" if ceiling else st["color"],
                markersize=16 if ceiling else 9,
                capsize=4,
                linewidth=1.6,
                label=f"{arm} (ceiling)" if ceiling else (f"{arm} (baseline)" if arm == baseline else arm),
            )
            x, y = r["tokens"], 100 * r["score"]
            # Arms on (nearly) the same spot share one label ("baseline = aa") instead of overprinting.
            near = next(
                (a for a in labels if abs(a.xy[0] - x) <= 0.02 * xspan and abs(a.xy[1] - y) <= 2), None
            )
            if near is not None:
                near.set_text(f"{near.get_text()} = {arm}")
            else:
                # a neighbour's label would overprint this one: put it under its point instead
                crowded = any(
                    abs(a.xy[0] - x) <= 0.08 * xspan and abs(a.xy[1] - y) <= 0.06 * yspan for a in labels
                )
                off, ha = ((-10, 8), "right") if ceiling else ((8, -16 if crowded else 6), "left")
                labels.append(
                    ax.annotate(arm, (x, y), textcoords="offset points", xytext=off, ha=ha, fontsize=10)
                )
            if ceiling:
                ax.axhline(100 * r["score"], color="#000000", linestyle=":", linewidth=1)
        ax.margins(x=0.08, y=0.08)
        ax.set_ylabel(f"{label} (%)")
        ax.set_title(
            f"{label} vs tokens kept (95% interval over sessions, clipped to 0-100%)", loc="left", fontsize=11
        )
        ax.grid(color="#EEEEEE")
        if k == 0 and ax.get_legend_handles_labels()[0]:  # no arm plotted (no tokens): no legend
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    axes[-1].set_xlabel("tokens kept after compaction (mean per session; the ceiling keeps everything)")
    return _save(fig, path)


def _ceiling_below(scores: list[tuple[str, str, pd.DataFrame]]) -> list[str]:
    """A note for each offline exam on which a compacted arm outscores the ceiling: not evidence."""
    out = []
    for label, metric, s in scores:
        if CEILING not in s.index or "offline" not in metric:
            continue
        above = [a for a in s.index if a != CEILING and s.loc[a, "mean"] > s.loc[CEILING, "mean"]]
        if above:
            out += [
                f"> **The ceiling scores below {', '.join(code(a) for a in above)} on the {label} "
                f"(`{metric}`).** The offline judge is a stand-in: a lexical reader (BM25 over the "
                "context's own passages, a fixed reading budget in characters). A summary states the facts "
                "in a few passages that use the question's words; the full history spreads them over many "
                "messages, some of which never use those words (an edit call does not say 'modified'; code "
                "that mentions 'user' outranks the user's own request), so on this metric a summary can "
                "match or beat the full history. This is an artefact of the stand-in, not evidence: judge exams with a model.",
                "",
            ]
    return out


GENERATED = "judge_"  # the generated exam's metrics (judge_offline_*, judge_*): what a judge budget reads


def held_out(metrics: pd.DataFrame, calibration: list[str]) -> pd.DataFrame:
    """``metrics`` without the generated exam's rows of the sessions its judge budget was chosen on."""
    if not len(metrics) or not calibration:
        return metrics
    drop = metrics["metric"].str.startswith(GENERATED) & metrics["session"].isin(set(calibration))
    return metrics[~drop]


def _budget_note(cal) -> list[str]:
    """How the judge budget was chosen, with the calibration sweep (ceiling arm only)."""
    rows = [
        [
            f"{b:,}" + (" **(chosen)**" if b == cal.budget else ""),
            _pct(v["mean"] / 100, v["half"] / 100),
            str(v["n"]),
        ]
        for b, v in sorted(cal.sweep.items())
    ]
    return [
        f"**The generated exam is reported on held-out sessions.** The offline judge's reading budget "
        f"(`max_chars` = {cal.budget:,}) was chosen by a rule stated before it was measured (docs/probe-banks.md): "
        f"{cal.rule}. Calibration part: {len(cal.calibration)} sessions; the generated exam below uses only "
        f"the {len(cal.reported)} others. The calibration sweep (`{cal.arm}` only, calibration part):",
        "",
        table(["`max_chars`", f"`{cal.arm}` `{cal.metric}`", "sessions with questions"], rows),
        "",
    ]


def section_scorecard(data: ReportData, out: Path) -> list[str]:
    """Table and plot of score vs tokens kept, paired win/loss/tie vs the baseline, exam noise."""
    from evalkit.score.judge_budget import load

    cal = load(data.run_dir)
    m = held_out(data.metrics, cal.calibration) if cal else data.metrics
    if not len(m):
        return ["No metrics."]
    base = data.baseline
    arms = data.arms
    tokens = pd.DataFrame(columns=["mean"])
    if len(data.events):  # the events, as the other figures: a run without them plots nothing
        ev = data.events.groupby(["arm", "session"])["tokens_after"].mean().groupby(level="arm").mean()
        tokens = pd.DataFrame({"mean": ev})
    scores: list[tuple[str, str, pd.DataFrame]] = []
    for label, options in SCORES:
        picked = _pick(m, options)
        if picked:
            scores.append((label, picked[0], arm_summary(m, *picked)))
    if not scores:
        return ["No exam in this run (no `judge`, `bank` or `identifiers` probe rows)."]
    header = [
        "arm",
        "tokens kept",
        *[f"{label} (`{metric}`)" for label, metric, _ in scores],
        "sessions (per score)",
    ]
    rows = []
    for arm in arms:
        cells = [code(arm) + (" (ceiling)" if arm == CEILING else "")]
        cells.append(f"{tokens.loc[arm, 'mean']:,.0f}" if arm in tokens.index else "–")
        ns = []
        for _, _, s in scores:
            cells.append(_pct(s.loc[arm, "mean"], s.loc[arm, "half"]) if arm in s.index else "–")
            ns.append(int(s.loc[arm, "n"]) if arm in s.index else 0)
        # each score has its own n (an arm is asked only where an answer left its view)
        rows.append([*cells, " / ".join(map(str, ns)) if len(set(ns)) > 1 else str(ns[0])])
    lines = [
        "Per arm, what it kept against what it still knows. Scores are % of expected facts (mean of "
        "per-session means ± the 95% t half-width over sessions); tokens kept is the context right after "
        f"each compaction. `{CEILING}` never compacts and answers from the full history: the 100% reference.",
        "",
        *(_budget_note(cal) if cal else []),
        table(header, rows),
        "",
        *_ceiling_below(scores),
    ]
    panels = [
        (
            f"{label}, held out" if cal and metric.startswith(GENERATED) else label,
            pd.DataFrame(
                {
                    "score": s["mean"],
                    "half": s["half"],
                    "tokens": tokens["mean"].reindex(s.index) if len(tokens) else np.nan,
                }
            ),
        )
        for label, metric, s in scores
    ]
    if not len(tokens):
        return [*lines, "Not plotted: no compaction events, so no tokens kept.", ""]
    fig = data.figures.draw(scorecard_plot, out / "fig-scorecard.png", panels, arms, base)
    lines += [
        f"![Each score against tokens kept per arm; the ceiling arm is the black star]({rel_link(fig, out)})",
        "",
    ]
    lines += _paired_section(m, arms, base, scores)
    return lines


def _paired_section(m: pd.DataFrame, arms: list[str], base: str, scores) -> list[str]:
    out: list[str] = []
    for label, prefixes in QUESTION_PREFIXES:
        grades = question_grades(m, prefixes)
        graded = set(grades["arm"].unique()) if len(grades) else set()
        if base not in graded:
            continue
        k = int(grades[grades["arm"] == base][["session", "metric"]].drop_duplicates().shape[0])
        rows = []
        for arm in arms:
            if arm == base or arm not in graded:
                continue
            w, lo, t = win_loss_tie(grades, arm, base)
            rows.append([code(arm), f"{w} W / {lo} L / {t} T", str(w + lo + t)])
        p = next((s.loc[base, "mean"] for lb, _, s in scores if lb == label and base in s.index), math.nan)
        noise = [f"binomial error of a {k}-question exam at {_pct(p)}: ± {binomial_error(p, k):.1f} points"]
        aa = next((s for lb, _, s in scores if lb == label), None)
        if aa is not None and AA in aa.index and base in aa.index:
            noise.append(
                f"A/A spread (`{AA}` − `{base}`): {100 * (aa.loc[AA, 'mean'] - aa.loc[base, 'mean']):+.1f} points"
            )
        out += [
            f"**{label}: per-question paired win/loss/tie vs `{base}`** (each question of each session, "
            "its grade averaged over the events where it was asked). Exam noise: " + "; ".join(noise) + ".",
            "",
            table(["arm", "vs baseline", "paired questions"], rows) if rows else "No other arm was asked.",
            "",
        ]
    return out
