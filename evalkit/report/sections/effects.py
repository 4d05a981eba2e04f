"""Effects per metric (metric × candidate) and metric means (metric × arm), each one wide table."""

from __future__ import annotations

from pathlib import Path

from evalkit.contracts.metrics import question_family, question_key
from evalkit.contracts.records import Verdict
from evalkit.report.data import ReportData
from evalkit.report.markdown import (
    code,
    interval,
    merge_same_rows,
    name,
    num,
    table,
)
from evalkit.report.sections.common import (
    confidence,
    interval_name,
    metric_direction,
    metric_errors,
    probe_info,
    questions_left_out,
    split_questions,
)


def _metric_order(verdicts: dict[str, Verdict]) -> list[tuple[str, str, str]]:
    """(metric, role, direction), success metrics first. A metric that is some candidate's success
    metric is plotted as one (with that threshold), even where others hold it as a guardrail."""
    seen: dict[str, tuple[str, str]] = {}
    for v in verdicts.values():
        for m, d in v.metrics.items():
            role, direction = str(d.role or "success"), str(d.direction or "higher")
            if m not in seen or (role == "success" and seen[m][0] != "success"):
                seen[m] = (role, direction)
    return sorted(((m, r, d) for m, (r, d) in seen.items()), key=lambda x: (x[1] != "success", x[0]))


def section_effects(data: ReportData, out: Path) -> list[str]:
    """Every decision metric (a row) against every candidate (a column): effect and interval. The
    p-values, MDEs and counts of each cell are in the viewer's overview and ``decision.json``."""
    verdicts = data.verdicts
    if not verdicts:
        return [
            "No effect sizes: `decision.json` has no verdicts with per-metric estimates (the statistics "
            "stage writes them)."
        ]
    cands = list(verdicts)
    rows = []
    for metric, role, direction in _metric_order(verdicts):
        cells = []
        for cand in cands:
            m = verdicts[cand].metrics.get(metric)
            mark = "**" if verdicts[cand].deciding_metric == metric else ""
            cells.append(f"{mark}{num(m.estimate, signed=True)}{mark} {interval(m.ci)}" if m else "–")
        rows.append([code(metric), f"{role}, {'↑' if direction == 'higher' else '↓'}", *cells])
    return [
        f"Effect and {confidence(data)} ({interval_name(data)}) per metric and candidate; **bold**: the "
        "metric that decided the candidate's verdict. ↑/↓: which direction is better.",
        "",
        table(["metric", "role", *[code(c) for c in cands]], rows),
    ]


def _better(direction: str) -> str:
    return f"{direction} is better" if direction in ("higher", "lower") else "neither (a count)"


def glossary(data: ReportData) -> list[tuple[str, str, str, str]]:
    """(metric, which direction is better, what it measures, what failure it catches) for every
    metric of the run, an exam's per-question metrics as one ``<family>:*`` row (plain text)."""
    # unique() first: the column is categorical, and a string per row is 15 MB at 800 sessions
    present = sorted({str(m) for m in data.metrics["metric"].unique()}) if not data.metrics.empty else []
    present, families = split_questions(present)
    info = probe_info(present)
    rows = [
        (m, _better(info[m][0]), info[m][1], info[m][2])
        if m in info
        else (
            m,
            f"{metric_direction(data, m)} is better" if metric_direction(data, m) else "not recorded",
            "neither a registered probe nor a continuation metric in this install",
            "",
        )
        for m in present
    ]
    rows += [
        (
            question_key(f + ":"),
            "higher is better",
            f"one row per question of an exam ({n:,} in this run): its grade, where it was asked",
            "paired arm against arm in the scorecard (win/loss/tie per question)",
        )
        for f, n in sorted(families.items())
    ]
    return rows


def section_means(data: ReportData, out: Path) -> list[str]:
    """Metric means as one wide table: a row per metric, a column per arm."""
    summary = data.summary
    kept, families = split_questions(sorted({str(d.get("metric")) for d in summary}))
    keep = set(kept)
    cell: dict[tuple[str, str], str] = {}
    for d in summary:
        if str(d.get("metric")) in keep:
            errs = d.get("errors") or 0
            cell[(str(d.get("metric")), str(d.get("arm")))] = num(d.get("mean")) + (
                f" ({errs} err)" if errs else ""
            )
    # A metric whose every value is an error has no mean and may be absent from the summary;
    # it still belongs in the table, as errors.
    for (arm, metric), (errs, values) in metric_errors(data).items():
        if (metric, arm) not in cell and errs and question_family(metric) is None:
            cell[(metric, arm)] = f"n/a ({errs} of {values} err)"
            keep.add(metric)
    if not cell:
        return ["`decision.json` has no `summary` table of metric means."]
    arms = [a for a in data.arms if any(k[1] == a for k in cell)]
    arms += sorted({a for _, a in cell} - set(arms))
    info = probe_info(sorted(keep))

    def arrow(m: str) -> str:
        d = info[m][0] if m in info else metric_direction(data, m)
        return {"higher": " ↑", "lower": " ↓"}.get(d or "", "")

    # Descriptive counts (no better direction: tokens, calls, turns) are the viewer's and the
    # cadence section's; this table holds what can be better or worse.
    counts = [m for m in sorted(keep) if not arrow(m)]
    keep -= set(counts)
    # A metric with the same mean under every arm needs no row of its own: one line names them.
    same = {
        m: cell[(m, arms[0])]
        for m in sorted(keep)
        if len(arms) > 1 and len({cell.get((m, a)) for a in arms}) == 1 and "err" not in cell[(m, arms[0])]
    }
    shown = [m for m in sorted(keep) if m not in same]
    lines = [
        "Mean of per-session means (↑/↓: which direction is better), an arm a row as in every per-arm "
        "table here; *err*: values a scorer could not compute, left out of the mean, never counted as "
        "zero. The viewer's overview says what each metric measures.",
        "",
        *questions_left_out(families, "here"),
    ]
    if counts:
        lines += [
            f"Descriptive counts (no better direction) are in the viewer: {', '.join(map(name, counts))}.",
            "",
        ]
    if same:
        lines += [
            "The same under every arm: " + ", ".join(f"{name(m)} {v}" for m, v in same.items()) + ".",
            "",
        ]
    if shown:
        lines.append(
            table(
                ["arm", *[name(m) + arrow(m) for m in shown]],
                merge_same_rows([[name(a), *[cell.get((m, a), "–") for m in shown]] for a in arms]),
            )
        )
    return lines
