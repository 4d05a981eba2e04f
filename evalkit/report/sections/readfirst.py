"""The warnings that change how to read the verdicts, on the report's first screen.

Only what can overturn a verdict or make it meaningless is here (a scorer failing on every value,
a verdict resting on a metric that cannot move, dead or lost sessions, failed summaries, a small
n); the Caveats section at the end lists every caveat.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.markdown import code
from evalkit.report.sections.common import LOW_N, metric_errors


def _names(items, limit: int = 6) -> str:
    items = list(items)
    shown = ", ".join(code(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def read_first(data: ReportData) -> list[str]:
    """Warnings, most serious first, as Markdown sentences."""
    out: list[str] = []
    # A metric whose every value is an error (a judge failing on every call) decides nothing.
    dead: dict[str, list[str]] = {}
    for (arm, metric), (errs, values) in sorted(metric_errors(data, fold_questions=True).items()):
        if values and errs == values:
            dead.setdefault(metric, []).append(arm)
    for metric, arms in dead.items():
        everywhere = "every arm" if len(arms) == len(data.arms) else _names(arms)
        out.append(
            f"**{code(metric)} failed on every value under {everywhere}** (scorer or judge errors): it "
            "has no mean and no effect, and a verdict that needs it is untested."
        )
    untested = [c for c, v in data.verdicts.items() if v.verdict == "untested"]
    if untested:
        out.append(f"**{len(untested)} untested**: {_names(untested)} (the rule column says why).")
    if data.health is not None:
        notes = data.health.verdict_notes
        if notes:
            out.append(
                f"**{len(notes)} verdicts rest on an unhealthy metric** (constant, or able to invert): "
                f"{_names(sorted(notes))}; see Metric health."
            )
    ev = data.events
    if len(ev):
        failed = ev[ev["summary_failed"]].groupby("arm").size()
        if len(failed):
            out.append(
                "**Failed summarizer calls** (compactions without a summary): "
                + ", ".join(f"{code(a)} {n}" for a, n in failed.items())
                + "."
            )
        dead_s = ev[ev["over_limit"]].groupby("arm")["session"].nunique()
        if len(dead_s):
            out.append(
                "**Dead sessions** (a compaction left the context above the window): "
                + ", ".join(f"{code(a)} {n}" for a, n in dead_s.items())
                + "."
            )
    lost = {c: v.lost_sessions for c, v in data.verdicts.items() if v.lost_sessions}
    if lost:
        out.append(
            "**Lost sessions** (the baseline has them, the candidate does not): "
            + ", ".join(f"{code(c)} {n}" for c, n in lost.items())
            + "."
        )
    ns = [v.n_sessions for v in data.verdicts.values() if isinstance(v.n_sessions, int)]
    n = min((x for x in ns if x > 0), default=None)
    if n is not None and n < LOW_N:
        out.append(f"**Low n**: as few as {n} session{'' if n == 1 else 's'} (< {LOW_N}); intervals are wide.")
    return out


def section_read_first(data: ReportData, out: Path) -> list[str]:
    from evalkit.report.sections.warnings import run_warnings

    found = [f"- {w}" for w in read_first(data)]
    return [*run_warnings(data), *(found or ["- Nothing else found that changes how to read the verdicts."])]
