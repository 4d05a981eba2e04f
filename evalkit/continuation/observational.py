"""The observational baseline: what the real agent did after each compaction its harness recorded.

Sessions imported from Claude Code (``compact_boundary`` + ``isCompactSummary``) or Codex
(``compacted``) hold :class:`~evalkit.contracts.session.Compaction` blocks where the harness compacted.
For each, the real agent's next N recorded calls are scored with the same re-fail / redo rules
as a continuation run (:func:`evalkit.continuation.metrics.refail_redo`), so a candidate's
numbers can be set against what production did. The window stops early at the next recorded
compaction, since calls after it acted from another context. Rows use the arm ``observed``.
"""

from __future__ import annotations

from evalkit.common.toolcalls import result_failed
from evalkit.continuation.agents import Step
from evalkit.continuation.environment import Answer
from evalkit.continuation.metrics import refail_redo
from evalkit.continuation.recording import SessionRecord
from evalkit.contracts.session import Compaction, Session

ARM = "observed"


def compaction_points(session: Session) -> list[int]:
    """Message indices holding a compaction the recording harness performed."""
    return [i for i, m in enumerate(session.messages) if any(isinstance(b, Compaction) for b in m.blocks)]


def observed_steps(rec: SessionRecord, at: int, n: int, until: int | None = None) -> list[Step]:
    """The real agent's first ``n`` calls after ``at`` (and before message ``until``), as steps."""
    steps = []
    for a in rec.after(at):
        if len(steps) >= n or (until is not None and a.index >= until):
            break
        r = a.result
        answer = (
            Answer(r.output, "recorded", result_failed(r), r.exit_code, a.index)
            if r is not None
            else Answer("", "recorded")
        )
        steps.append(Step(a.call, a.op, answer))
    return steps


def observed_metrics(
    session: Session, n: int = 30, record: SessionRecord | None = None
) -> list[tuple[int, str, float]]:
    """(compaction number, metric, value) for every recorded compaction of a session."""
    points = compaction_points(session)
    if not points:
        return []
    rec = record or SessionRecord.build(session)
    rows: list[tuple[int, str, float]] = []
    for k, at in enumerate(points):
        until = points[k + 1] if k + 1 < len(points) else None
        steps = observed_steps(rec, at, n, until)
        refails, redos = refail_redo(rec, at, steps)
        rows += [
            (k, f"refail_{n}", float(refails > 0)),
            (k, f"redo_{n}", float(redos > 0)),
            (k, "calls_used", float(len(steps))),
        ]
    return rows
