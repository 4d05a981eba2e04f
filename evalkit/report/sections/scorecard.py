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

from evalkit.contracts.metrics_sessions import arm_summary
from evalkit.report.data import ReportData
from evalkit.report.figures import Dot, Panel, dot_grid
from evalkit.report.markdown import code, merge_same_rows, rel_link, table

CEILING = "uncompacted"
FLOOR = "no-history"
AA = "aa"
SEARCH_TOKENS = ("exam_search_tokens", "judge_search_tokens")  # the recovery arm's charged search
# (label, [(metric, scale)]): the first metric present in the run is used.
SCORES = [
    ("generated exam", [("judge_overall", 5.0), ("judge_offline_overall", 5.0)]),
    ("bank exam", [("exam", 1.0), ("exam_offline", 1.0)]),
    ("identifier recall", [("identifier_recall", 1.0)]),
    ("identifier exam", [("identifier_exam", 1.0)]),
]
# Exams of the question table (one row per question per event): the paired win/loss/tie count.
QUESTION_EXAMS = [
    ("generated exam", ("judge", "judge_offline")),
    ("bank exam", ("exam", "exam_offline")),
    ("identifier exam", ("identifier",)),
]


def _pick(metrics: pd.DataFrame, options: list[tuple[str, float]]) -> tuple[str, float] | None:
    present = set(metrics["metric"].unique()) if len(metrics) else set()
    return next(((m, s) for m, s in options if m in present), None)


def question_grades(questions: pd.DataFrame, exams: tuple[str, ...]) -> pd.DataFrame:
    """(arm, session, question) → mean grade over the events where it was asked, of the first of
    ``exams`` with grades (the question table, :mod:`evalkit.contracts.questions`); the question
    is in column ``metric``."""
    for exam in exams:
        q = (
            questions[(questions["exam"] == exam) & questions["grade"].notna()]
            if len(questions)
            else questions
        )
        if len(q):
            g = q.groupby(["arm", "session", "question"], observed=True)["grade"].mean().reset_index()
            return g.rename(columns={"question": "metric", "grade": "value"})
    return pd.DataFrame(columns=["arm", "session", "metric", "value"])


def win_loss_tie(grades: pd.DataFrame, arm: str, baseline: str) -> tuple[int, int, int]:
    """Paired per (session, question): the arm's grade above, below or equal to the baseline's.
    A bank question's name holds the point it was asked at (``…@<message>``), so it pairs only
    with the same question asked at the same point."""
    a = grades[grades["arm"] == arm].set_index(["session", "metric"])["value"]
    b = grades[grades["arm"] == baseline].set_index(["session", "metric"])["value"]
    d = (a - b).dropna()
    eps = 1e-9
    return int((d > eps).sum()), int((d < -eps).sum()), int((d.abs() <= eps).sum())


def unpaired(grades: pd.DataFrame, arm: str, baseline: str) -> int:
    """Questions one of the two arms was asked where the other never was (another point): counted
    apart, never mixed into the paired counts."""
    a = set(map(tuple, grades[grades["arm"] == arm][["session", "metric"]].to_numpy()))
    b = set(map(tuple, grades[grades["arm"] == baseline][["session", "metric"]].to_numpy()))
    return len(a ^ b)


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
    """Small multiples sharing one row per arm: tokens kept, then each score with its interval.
    The ceiling arm is a black star with a dotted line at its score, the baseline black; reading
    along a row compares one arm's cost with what it still knows, so no legend sits on the data
    and 16 arms need no 16 colours."""
    first = panels[0][1]
    shown = [a for a in arms if a in first.index]

    def dot(arm: str, value: float, half: float = math.nan, clip: bool = False) -> Dot:
        lo, hi = value - half, value + half
        if clip:  # a t interval on a few sessions can pass 0% or 100%; a share cannot
            lo, hi = max(lo, 0.0), min(hi, 100.0)
        color = "#000000" if arm in (CEILING, baseline) else "#0072B2"
        return Dot(value, lo, hi, color, "*" if arm == CEILING else "o", size=11 if arm == CEILING else 6)

    grid = [
        Panel(
            "tokens kept",
            "after compaction (mean per session)",
            {a: dot(a, float(first.loc[a, "tokens"])) for a in shown},
        )
    ]
    for label, rows in panels:
        ceiling = 100 * float(rows.loc[CEILING, "score"]) if CEILING in rows.index else math.nan
        grid.append(
            Panel(
                label,
                "% (95% interval over sessions)",
                {
                    a: dot(a, 100 * float(rows.loc[a, "score"]), 100 * float(rows.loc[a, "half"]), clip=True)
                    for a in shown
                    if a in rows.index
                },
                lines=((ceiling, "#000000", ":"),),
            )
        )
    legend = [
        (baseline if baseline == "baseline" else f"{baseline} (baseline)", "#000000", "o", True),
        ("candidate", "#0072B2", "o", True),
        *([(f"{CEILING} (ceiling; dotted: its score)", "#000000", "*", True)] if CEILING in shown else []),
    ]
    return dot_grid(path, shown, grid, "Scores against tokens kept, per arm", legend, cols=min(4, len(grid)))


def _exam_checks(data: ReportData, scores: list[tuple[str, str, pd.DataFrame]]) -> list[str]:
    """Each shown exam's ceiling-vs-floor check from ``health.json`` (evalkit.score.examcheck)."""
    exams = data.health.exams if data.health is not None else {}
    out = []
    for label, _, _ in scores:
        check = exams.get(label)
        if check is None:
            continue
        flag = "" if check["usable"] else " **UNUSABLE: no verdict rests on it.**"
        out.append(f"- **{label}**: {check['reason']}.{flag}")
    if not out:
        return []
    return [
        f"**Does each exam tell the ceiling (`{CEILING}`) from the floor (`{FLOOR}`)?** Per question, "
        "paired, an exact one-sided sign test (metric health):",
        "",
        *out,
        "",
    ]


GENERATED = "judge_"  # the generated exam's metrics (judge_offline_*, judge_*): what a judge budget reads


def held_out(metrics: pd.DataFrame, calibration: list[str], column: str = "metric") -> pd.DataFrame:
    """``metrics`` (or the question table, ``column="exam"``) without the generated exam's rows of
    the sessions its judge budget was chosen on."""
    if not len(metrics) or not calibration:
        return metrics
    prefix = GENERATED if column == "metric" else "judge"  # the question table's exams: judge, judge_offline
    drop = metrics[column].str.startswith(prefix) & metrics["session"].isin(set(calibration))
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
    asked = held_out(data.questions, cal.calibration, "exam") if cal else data.questions
    if not len(m):
        return ["No metrics."]
    base = data.baseline
    arms = data.arms
    tokens = pd.DataFrame(columns=["mean"])
    if len(data.events):  # the events, as the other figures: a run without them plots nothing
        ev = data.events.groupby(["arm", "session"])["tokens_after"].mean().groupby(level="arm").mean()
        tokens = pd.DataFrame({"mean": ev})
    searched = m[m["metric"].isin(SEARCH_TOKENS) & m["error"].isna()]
    search = searched.groupby(["arm", "session"], observed=True)["value"].mean().groupby(level="arm").mean()
    scores: list[tuple[str, str, pd.DataFrame]] = []
    for label, options in SCORES:
        picked = _pick(m, options)
        if picked:
            scores.append((label, picked[0], arm_summary(m, *picked)))
    if not scores:
        return ["No exam in this run (no `judge`, `bank` or `identifiers` probe rows)."]
    paired_cols, paired, noise = _paired(asked, arms, base, scores)
    header = [
        "arm",
        "tokens kept",
        # the bank exam graded offline is a lexical check (evalkit.score.factmatch), not a model's grade
        *[
            f"{label} (`{metric}`{', lexical check' if metric.startswith('exam_offline') else ''})"
            for label, metric, _ in scores
        ],
        "sessions (per score)",
        *paired_cols,
    ]
    rows = []
    for arm in arms:
        role = " (ceiling)" if arm == CEILING else " (floor)" if arm == FLOOR else ""
        cells = [code(arm) + role]
        kept = f"{tokens.loc[arm, 'mean']:,.0f}" if arm in tokens.index else "–"
        if arm in search.index:  # the recovery arm is charged its search round trip
            kept += f" + {search[arm]:,.0f} search"
        cells.append(kept)
        ns = []
        for _, _, s in scores:
            cells.append(_pct(s.loc[arm, "mean"], s.loc[arm, "half"]) if arm in s.index else "–")
            ns.append(int(s.loc[arm, "n"]) if arm in s.index else 0)
        # each score has its own n (an arm is asked only where an answer left its view)
        rows.append([*cells, " / ".join(map(str, ns)) if len(set(ns)) > 1 else str(ns[0]), *paired[arm]])
    lines = [
        "Per arm, what it kept against what it still knows. Scores are % of expected facts (mean of "
        "per-session means ± the 95% t half-width over sessions); tokens kept is the context right after "
        f"each compaction. `{CEILING}` never compacts and answers from the full history: the 100% reference. "
        f"*W / L / T*: per question of each session (its grade averaged over the events where it was asked), "
        f"the arm's grade above, below or equal to `{base}`'s; questions asked of one arm only (at a point "
        "the other never reached) are counted apart as *unpaired*. Exam noise: " + "; ".join(noise) + ".",
        "",
        *(_budget_note(cal) if cal else []),
        table(header, merge_same_rows(rows)),
        "",
        *_exam_checks(data, scores),
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
    return lines


def _paired(questions: pd.DataFrame, arms: list[str], base: str, scores):
    """Per exam with per-question grades: a column header, per arm its paired win/loss/tie cell
    against the baseline, and the exam's noise in words (binomial error of its k questions, the
    A/A arm's spread)."""
    cols: list[str] = []
    cells: dict[str, list[str]] = {a: [] for a in arms}
    noise: list[str] = []
    for label, exams in QUESTION_EXAMS:
        grades = question_grades(questions, exams)
        graded = set(grades["arm"].unique()) if len(grades) else set()
        if base not in graded:
            continue
        k = int(grades[grades["arm"] == base][["session", "metric"]].drop_duplicates().shape[0])
        cols.append(f"{label}: W / L / T")
        for arm in arms:
            if arm != base and arm in graded:
                w, lo, t = win_loss_tie(grades, arm, base)
                u = unpaired(grades, arm, base)
                # questions asked of one arm only (a point the other never reached) are counted apart
                cells[arm].append(f"{w} / {lo} / {t}" + (f" (+{u} unpaired)" if u else ""))
            else:
                cells[arm].append("–")
        p = next((s.loc[base, "mean"] for lb, _, s in scores if lb == label and base in s.index), math.nan)
        words = (
            f"{label}: binomial error of a {k}-question exam at {_pct(p)} ± {binomial_error(p, k):.1f} points"
        )
        aa = next((s for lb, _, s in scores if lb == label), None)
        if aa is not None and AA in aa.index and base in aa.index:
            words += f", A/A spread {100 * (aa.loc[AA, 'mean'] - aa.loc[base, 'mean']):+.1f} points"
        noise.append(words)
    return cols, cells, noise or ["no per-question grades"]
