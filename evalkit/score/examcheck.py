"""Every exam checks itself: its ceiling must beat its floor, question by question.

An exam can support a verdict only if it tells a context that holds the answers from one that
does not. Per exam family (the generated exam, the bank exam, the identifier exam), the check
pairs, per (session, question), the grade of the ceiling arm ``uncompacted`` (the full history)
with the grade of the floor arm ``no-history`` (the head removed, no summary), each averaged over
the events where the question was asked. The exam is *usable* when the ceiling wins more
questions than it loses and an exact one-sided sign test over the untied questions
(``scipy.stats.binomtest``, ``p < alpha``) says so. Otherwise, or when either arm is missing, the
exam is unusable: metric health lists it with its numbers, and a verdict resting on one of its
metrics is untested (:func:`evalkit.decide.health.annotate_decision`).

The same check calibrates a model judge: run it on a few sessions with the judge configured
(``evalkit run`` with ``uncompacted`` and ``no-history`` among the arms) before trusting its grades.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pandas as pd
from scipy import stats

CEILING, FLOOR = "uncompacted", "no-history"
# exam -> (its per-question metric prefixes, the prefixes of the metrics that report it)
EXAMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "generated exam": (("judge_q:", "judge_offline_q:"), ("judge_",)),
    "bank exam": (("exam_q:", "exam_offline_q:"), ("exam",)),
    "identifier exam": (("identifier_q:",), ("identifier_exam",)),
}


@dataclass
class ExamCheck:
    """One exam's ceiling-vs-floor check (grades are shares in 0..1, the generated exam's 0..5 / 5)."""

    exam: str
    usable: bool
    reason: str
    questions: int = 0  # (session, question) pairs both arms were asked
    ceiling_wins: int = 0
    floor_wins: int = 0
    ties: int = 0
    ceiling_mean: float | None = None
    floor_mean: float | None = None
    p_value: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _scale(prefix: str) -> float:
    return 5.0 if prefix.startswith("judge") else 1.0


def question_means(rows: Iterable[pd.DataFrame], arms: tuple[str, ...] = (CEILING, FLOOR)) -> pd.DataFrame:
    """(exam, arm, session, metric) -> mean grade over the events it was asked, for ``arms``."""
    parts = []
    for m in rows:
        m = m[m["arm"].isin(arms) & m["value"].notna()]
        for exam, (prefixes, _) in EXAMS.items():
            for p in prefixes:
                q = m[m["metric"].str.startswith(p)]
                if len(q):
                    g = q.groupby(["arm", "session", "metric"], observed=True)["value"].mean() / _scale(p)
                    parts.append(g.reset_index().assign(exam=exam))
    cols = ["exam", "arm", "session", "metric", "value"]
    return pd.concat(parts)[cols] if parts else pd.DataFrame(columns=cols)


def check_exam(grades: pd.DataFrame, exam: str, alpha: float) -> ExamCheck:
    """The check of one exam from its per-question grades (:func:`question_means`)."""
    g = grades[grades["exam"] == exam] if len(grades) else grades
    have = set(g["arm"]) if len(g) else set()
    if not len(g):
        return ExamCheck(exam, False, "not asked in this run")
    missing = [a for a in (CEILING, FLOOR) if a not in have]
    if missing:
        return ExamCheck(
            exam, False, f"no grades for {' and '.join(missing)}: add it to [replay] arms to check this exam"
        )
    c = g[g["arm"] == CEILING].set_index(["session", "metric"])["value"]
    f = g[g["arm"] == FLOOR].set_index(["session", "metric"])["value"]
    both = pd.concat([c.rename("c"), f.rename("f")], axis=1, join="inner")
    if not len(both):
        return ExamCheck(exam, False, "the ceiling and the floor were never asked the same question")
    d = both["c"] - both["f"]
    wins, losses = int((d > 1e-9).sum()), int((d < -1e-9).sum())
    ties = len(d) - wins - losses
    p = (
        float(stats.binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue)
        if wins + losses
        else 1.0
    )
    usable = wins > losses and p < alpha
    out = ExamCheck(
        exam,
        usable,
        "",
        len(d),
        wins,
        losses,
        ties,
        float(both["c"].mean()),
        float(both["f"].mean()),
        p,
    )
    numbers = (
        f"ceiling {100 * out.ceiling_mean:.1f}% vs floor {100 * out.floor_mean:.1f}% on {len(d)} paired "
        f"questions: {wins} W / {losses} L / {ties} T, sign test p = {p:.3g}"
    )
    out.reason = (
        f"usable: {numbers} < {alpha:g}"
        if usable
        else f"unusable: the ceiling does not beat the floor significantly ({numbers}, alpha {alpha:g})"
    )
    return out


def check_exams(rows: Iterable[pd.DataFrame], alpha: float = 0.025) -> dict[str, ExamCheck]:
    """Every exam's check from metric rows (frames with arm, session, metric, value)."""
    grades = question_means(rows)
    return {exam: check_exam(grades, exam, alpha) for exam in EXAMS}


def exam_of(metric: str) -> str | None:
    """The exam a metric reports (its score, per-kind means or a question's grade), or None."""
    for exam, (prefixes, reports) in EXAMS.items():
        if metric.startswith(prefixes) or metric.startswith(reports):
            if metric.endswith("_search_tokens"):
                return None  # the recovery arm's cost, not a grade
            return exam
    return None


def nothing_to_judge(run_dir) -> str | None:
    """Why a finished run has nothing to judge (no arm compacted any session), or None.

    No compaction means no exam question was asked and no verdict can be drawn: the run says
    why (the trigger and the largest session against it) and exits with the gate's code for an
    empty result set (``docs/rules.md``: exit 1)."""
    import json
    from pathlib import Path

    run = Path(run_dir)
    events = sorted((run / "events").glob("*.jsonl"))
    if any(p.stat().st_size for p in events):
        return None
    cfg = (
        json.loads((run / "config.json").read_text()).get("config", {})
        if (run / "config.json").is_file()
        else {}
    )
    from evalkit.contracts.config import ReplayConfig

    rp = ReplayConfig.model_validate(cfg.get("replay", {}))
    trigger = rp.trigger
    manifest = run / "corpus" / "manifest.json"
    sessions = json.loads(manifest.read_text()).get("sessions", []) if manifest.is_file() else []
    most_msgs = max((int(s.get("messages", 0)) for s in sessions), default=0)
    most_tokens = max((-(-int(s.get("bytes", 0)) // 4) for s in sessions), default=0)
    if trigger == "tokens":
        limit = rp.window - rp.reserve
        size = f"the threshold is {limit:,} tokens (window - reserve); the largest session is about {most_tokens:,} tokens"
    elif trigger == "messages":
        size = f"the threshold is {rp.max_messages} messages; the largest session has {most_msgs}"
    else:
        size = f"the largest session has {most_msgs} messages"
    return (
        f"nothing to judge: no arm compacted any of the {len(sessions)} session(s) under trigger = {trigger!r} "
        f'({size}), so no exam question was asked. Lower the threshold, or use trigger = "once" '
        "(compact exactly once, at replay.once_at of each session)."
    )
