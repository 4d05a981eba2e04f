"""What each exam question asked about: the question table's ``about`` column
(:mod:`evalkit.contracts.questions`).

A question's id names it but does not say what it probes: the identifier exam's is a hash of the
identifier, a bank's or the generated exam's an id in a file. Each exam's source is at hand where a
session is scored, so its questions are described there: the identifier itself (the exam asks
whether it is still visible), the generated exam's question text, a bank question's text.
"""

from __future__ import annotations

from collections.abc import Iterable

from evalkit.score.base import SessionView
from evalkit.score.identifiers import question_id

# The question table's exam names by the source their questions come from.
IDENTIFIER_EXAMS = ("identifier",)
GENERATED_EXAMS = ("judge", "judge_offline")
BANK_EXAMS = ("exam", "exam_offline")


def about(view: SessionView, asked: Iterable[tuple[str, str]]) -> dict[str, str]:
    """question → what it asks about, for the (exam, question) pairs ``asked`` in the session of
    ``view`` (questions as the question table names them); a question whose source does not
    describe it is left out (its ``about`` stays null)."""
    sources: dict[tuple[str, ...], dict[str, str]] = {
        IDENTIFIER_EXAMS: {question_id(i): i.value for i in view.facts.identifiers},
        GENERATED_EXAMS: {str(q["id"]): str(q["text"]) for q in view.extras.get("questions") or []},
    }
    ctx = view.extras.get("ctx")
    banks = (getattr(ctx, "banks", None) or {}).get(view.session.id, [])
    sources[BANK_EXAMS] = {str(q["id"]): str(q["text"]) for q in banks}
    out: dict[str, str] = {}
    for exam, question in asked:
        for exams, texts in sources.items():
            if exam in exams:
                # A bank question is named with the message it was asked at: <bank>/<id>@<message>.
                key = question.rsplit("@", 1)[0] if exams is BANK_EXAMS else question
                if key in texts:
                    out[question] = texts[key]
    return out
