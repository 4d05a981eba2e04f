"""Section 3, effects: per candidate and metric, the effect with its interval and forest plot, the means and a glossary."""

from __future__ import annotations

import math
from pathlib import Path

from evalkit.contracts.metrics import question_family, question_key
from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.figures import ForestRow, forest_plot
from evalkit.report.markdown import (
    code,
    interval,
    name,
    num,
    pval,
    rel_link,
    slug,
    table,
)
from evalkit.report.sections.common import (
    as_float,
    confidence,
    interval_name,
    metric_direction,
    metric_errors,
    probe_info,
    questions_left_out,
    split_questions,
)


def _metric_order(verdicts: dict) -> list[tuple[str, str, str]]:
    """(metric, role, direction), success metrics first. A metric that is some candidate's success
    metric is plotted as one (with that threshold), even where others hold it as a guardrail."""
    seen: dict[str, tuple[str, str]] = {}
    for v in verdicts.values():
        for m, d in (v.get("metrics") or {}).items():
            role, direction = str(d.get("role", "success")), str(d.get("direction", "higher"))
            if m not in seen or (role == "success" and seen[m][0] != "success"):
                seen[m] = (role, direction)
    return sorted(((m, r, d) for m, (r, d) in seen.items()), key=lambda x: (x[1] != "success", x[0]))


def _noise_interval(data: ReportData, metric: str) -> tuple[float, float] | None:
    nf = (data.decision.get("noise_floor") or {}).get(metric) or {}
    ci = nf.get("ci")
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
        return float(ci[0]), float(ci[1])
    return None


def section_effects(data: ReportData, out: Path) -> list[str]:
    verdicts = data.verdicts
    lines: list[str] = []
    conf = confidence(data)
    if verdicts:
        lines += [
            f"One plot per metric: each candidate's difference from the baseline with its {conf} "
            + (
                "(the clustered-SE t interval over sessions; a verdict needs it beyond the threshold as well as "
                "the paired sign-flip test). "
                if interval_name(data) == "clustered t"
                else "(the paired sign-flip test, inverted). "
            )
            + "The dashed line is the decision threshold; the grey band, where "
            "shown, is the A/A noise floor. A point's shape and its label name the verdict.",
            "",
        ]
        plots, captions = [], []
        for metric, role, direction in _metric_order(verdicts):
            rows, threshold = [], None
            for cand, v in verdicts.items():
                m = (v.get("metrics") or {}).get(metric)
                if not m:
                    continue
                ci = m.get("ci") or [math.nan, math.nan]
                rows.append(
                    ForestRow(
                        cand,
                        str(v.get("verdict")),
                        as_float(m.get("estimate")),
                        as_float(ci[0]),
                        as_float(ci[1]),
                    )
                )
                # A metric can be one candidate's success metric and another's guardrail: draw
                # the threshold that belongs to the role this plot is titled with.
                if m.get("role") == role and m.get("threshold") is not None:
                    threshold = m["threshold"]
            plots.append(
                (
                    out / f"fig-effects-{slug(metric)}.png",
                    metric,
                    direction,
                    role,
                    rows,
                    as_float(threshold) if threshold is not None else None,
                    _noise_interval(data, metric),
                )
            )
            better = "higher" if direction == "higher" else "lower"
            captions.append(f"{metric}: effect of each candidate vs baseline ({better} is better)")
        figs = [data.figures.draw(forest_plot, *job) for job in plots]
        for fig, caption in zip(figs, captions, strict=True):
            lines += [f"![{caption}]({rel_link(fig, out)})", ""]
        rows = []
        for metric, _, _ in _metric_order(verdicts):
            for cand, v in verdicts.items():
                m = (v.get("metrics") or {}).get(metric)
                if not m:
                    continue
                rows.append(
                    [
                        code(metric),
                        code(cand),
                        f"{m.get('role', 'n/a')}, {m.get('direction', 'n/a')} is better",
                        f"{num(m.get('baseline_mean'))} → {num(m.get('candidate_mean'))}",
                        f"{num(m.get('estimate'), signed=True)} {interval(m.get('ci'))}",
                        pval(m.get("p_value")),
                        pval(m.get("p_holm")),
                        num(m.get("threshold")),
                        num(m.get("mde")),
                        f"{m.get('n_sessions', 'n/a')} ({m.get('unmatched', 0)} unmatched, {m.get('errors', 0)} errors)",
                    ]
                )
        lines += [
            table(
                [
                    "metric",
                    "candidate",
                    "role",
                    "mean: baseline → candidate",
                    f"effect [{conf}, {interval_name(data)}]",
                    "p",
                    "p (Holm)",
                    "threshold",
                    "MDE",
                    "n sessions",
                ],
                rows,
            ),
            "",
            "*p (Holm)* is adjusted for testing several metrics per candidate (n/a where the metric is not in "
            "the adjusted family). *MDE* is the true difference at which the metric's test (against its "
            "threshold) passes with the configured power; an effect below it that looks like zero is not "
            "evidence of no effect.",
            "",
        ]
    else:
        lines += [
            "No effect sizes: `decision.json` has no verdicts with per-metric estimates (the statistics "
            "stage writes them). Only the per-arm means below are available.",
            "",
        ]
    lines += _glossary(data)
    lines += _means_table(data)
    return lines


def _better(direction: str) -> str:
    return f"{direction} is better" if direction in ("higher", "lower") else "neither (a count)"


def _glossary(data: ReportData) -> list[str]:
    # unique() first: the column is categorical, and a string per row is 15 MB at 800 sessions
    present = sorted({str(m) for m in data.metrics["metric"].unique()}) if not data.metrics.empty else []
    present, families = split_questions(present)
    info = probe_info(present)
    rows = [
        [name(m), _better(info[m][0]), escape_inline(info[m][1]), escape_inline(info[m][2])]
        if m in info
        else [
            name(m),
            f"{metric_direction(data, m)} is better" if metric_direction(data, m) else "not recorded",
            "neither a registered probe nor a continuation metric in this install",
            "",
        ]
        for m in present
    ]
    rows += [
        [
            code(question_key(f + ":")),
            "higher is better",
            f"one row per question of an exam ({n:,} in this run): its grade, where it was asked",
            "paired arm against arm in the scorecard (win/loss/tie per question)",
        ]
        for f, n in sorted(families.items())
    ]
    if not rows:
        return []
    return ["### What each metric measures", "", table(["metric", "better", "measures", "catches"], rows), ""]


def _means_table(data: ReportData) -> list[str]:
    summary = list(data.decision.get("summary") or [])
    kept, families = split_questions(sorted({str(d.get("metric")) for d in summary}))
    keep = set(kept)
    summary = [d for d in summary if str(d.get("metric")) in keep]
    have = {(str(d.get("arm")), str(d.get("metric"))) for d in summary}
    # A metric whose every value is an error has no mean and may be absent from the summary;
    # it still belongs in the table, as errors.
    for (arm, metric), (errs, values) in metric_errors(data).items():
        if (arm, metric) not in have and errs and question_family(metric) is None:
            summary.append(
                {"arm": arm, "metric": metric, "sessions": 0, "mean": None, "errors": errs, "values": values}
            )
    if not summary:
        return ["`decision.json` has no `summary` table of metric means."]
    return [
        "### Metric means per arm",
        "",
        "Mean of per-session means; n is the number of sessions with a value; errors are values a scorer "
        "could not compute (left out of the mean, never counted as zero).",
        "",
        *questions_left_out(families, "here"),
        table(
            ["metric", "arm", "n sessions", "mean", "errors"],
            [
                [
                    name(d.get("metric")),
                    name(d.get("arm")),
                    str(d.get("sessions", "n/a")),
                    num(d.get("mean")),
                    str(d.get("errors", "n/a")),
                ]
                for d in sorted(summary, key=lambda d: (str(d.get("metric")), str(d.get("arm"))))
            ],
        ),
    ]
