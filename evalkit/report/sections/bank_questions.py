"""Report section: every probe-bank question with each arm's grade.

One row per question the run pinned (``corpus/banks.json``): its bank and id, kind, the question,
the expected facts, and per arm the grade (% of facts, mean over the events it was asked at) or
why there is none: "n/g" when the lexical check cannot read one of its facts, "–" when the arm was
never asked it (it never compacted where the question is current). A long bank shows its first
screen of rows; the rest is collapsed under a ``<details>`` element.
"""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import code, table

FIRST_SCREEN = 20  # rows shown before the rest of a long bank collapses
EXAMS = ("exam", "exam_offline")  # the bank exam in the question table (evalkit.contracts.questions)


def _facts(expected: list) -> str:
    return "; ".join(" | ".join(e) if isinstance(e, list) else e for e in expected)


def question_table(data: ReportData) -> tuple[list[str], list[list[str]]]:
    """The header and one row per pinned bank question (grades in % per arm)."""
    p = Path(data.run_dir) / "corpus" / "banks.json"
    pinned = json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}
    m = data.questions
    q = m[m["exam"].isin(EXAMS) & m["grade"].notna()] if len(m) else m
    grades: dict[tuple[str, str, str], float] = {}
    if len(q):
        # a bank question is <bank>/<id>@<point>: its grade is the mean over points of the mean
        # over the events where it was asked at that point
        at = q.groupby(["arm", "session", "question"], observed=True)["grade"].mean().reset_index()
        qid = at["question"].str.rsplit("@", n=1).str[0]
        per = at.assign(qid=qid).groupby(["arm", "session", "qid"], observed=True)["grade"].mean()
        grades = {k: float(v) for k, v in per.items()}
    arms = data.arms
    header = ["question", "kind", "asked", "expected facts", *[code(a) for a in arms]]
    rows = []
    for sid, questions in sorted(pinned.items()):
        for question in questions:
            cells = []
            for arm in arms:
                g = grades.get((arm, sid, question["id"]))
                if g is not None:
                    cells.append(f"{100 * g:.0f}%")
                else:
                    cells.append("n/g" if question.get("lexical") is False else "–")
            rows.append(
                [
                    code(question["id"]),
                    question["kind"],
                    escape_inline(question["text"]),
                    escape_inline(_facts(question["expected"])),
                    *cells,
                ]
            )
    return header, rows


def section_bank_questions(data: ReportData, out: Path) -> list[str]:
    """Each bank question with each arm's grade; long banks collapse after the first screen."""
    header, rows = question_table(data)
    if not rows:
        return []  # no bank in this run: the section is left out (`[score] banks` adds one)
    m = data.questions
    offline = bool(len(m)) and (m["exam"] == "exam_offline").any()
    grader = (
        "graded by the lexical check (facts matched on word and number boundaries: not a model)"
        if offline
        else "graded by the run's model judge"
    )
    lines = [
        f"Each hand-written bank question with each arm's grade (% of its expected facts, {grader}; mean "
        "over the events where it was asked). n/g: the lexical check cannot read one of its facts (a model "
        "judge can); –: the arm was never asked it.",
        "",
        table(header, rows[:FIRST_SCREEN]),
        "",
    ]
    if len(rows) > FIRST_SCREEN:
        rest = len(rows) - FIRST_SCREEN
        lines += [
            f"<details><summary>{rest} more question(s)</summary>",
            "",
            table(header, rows[FIRST_SCREEN:]),
            "",
            "</details>",
            "",
        ]
    return lines
