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

from dataclasses import asdict, dataclass

import pandas as pd
from scipy import stats

from evalkit.contracts.records import CorpusManifest, RunConfig
from evalkit.contracts.runs import read_record

CEILING, FLOOR = "uncompacted", "no-history"
# exam -> (its exams in the question table, evalkit.contracts.questions; the prefixes of the metrics that report it)
EXAMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "generated exam": (("judge", "judge_offline"), ("judge_",)),
    "bank exam": (("exam", "exam_offline"), ("exam",)),
    "identifier exam": (("identifier",), ("identifier_exam",)),
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


def scale(exam: str) -> float:
    """What a grade of the question table's ``exam`` is out of (the generated exam's are 0..5)."""
    return 5.0 if exam.startswith("judge") else 1.0


def question_means(questions: pd.DataFrame, arms: tuple[str, ...] = (CEILING, FLOOR)) -> pd.DataFrame:
    """(exam, arm, session, metric) -> mean grade (as a share) over the events where the question
    was asked, for ``arms``; ``metric`` names the question (``<exam>_q:<question>``)."""
    cols = ["exam", "arm", "session", "metric", "value"]
    q = questions[questions["arm"].isin(arms) & questions["grade"].notna()] if len(questions) else questions
    parts = []
    for exam, (names, _) in EXAMS.items():
        for name in names:
            g = q[q["exam"] == name]
            if len(g):
                per = g.groupby(["arm", "session", "question"], observed=True)["grade"].mean() / scale(name)
                per = per.reset_index().rename(columns={"grade": "value"})
                per["metric"] = name + "_q:" + per["question"].astype(str)
                parts.append(per.assign(exam=exam))
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


def check_exams(questions: pd.DataFrame, alpha: float = 0.025) -> dict[str, ExamCheck]:
    """Every exam's check from the run's question table (:mod:`evalkit.contracts.questions`)."""
    grades = question_means(questions)
    return {exam: check_exam(grades, exam, alpha) for exam in EXAMS}


def exam_of(metric: str) -> str | None:
    """The exam a metric reports (its score or per-kind means), or None."""
    for exam, (_, reports) in EXAMS.items():
        if metric.startswith(reports):
            if metric.endswith("_search_tokens"):
                return None  # the recovery arm's cost, not a grade
            return exam
    return None


def nothing_to_judge(run_dir) -> str | None:
    """Why a finished run has nothing to judge (no arm compacted any session), or None.

    No compaction means no exam question was asked and no verdict can be drawn: the run says
    why (the trigger and the largest session against it) and exits with the gate's code for an
    empty result set (``docs/rules.md``: exit 1)."""
    from pathlib import Path

    run = Path(run_dir)
    events = sorted((run / "events").glob("*.jsonl"))
    if any(p.stat().st_size for p in events):
        return None
    rc, manifest = read_record(run, RunConfig), read_record(run, CorpusManifest)
    from evalkit.contracts.config import ReplayConfig

    rp = ReplayConfig.model_validate((rc.config if rc else {}).get("replay", {}))
    trigger = rp.trigger
    sessions = manifest.sessions if manifest else []
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
