"""Continuation metrics: what an agent did in its first N calls after a compaction, judged by the recording.

- ``refail_N``: 1 when, within N calls, the agent re-ran a command whose latest run before the
  compaction failed, with no file modified since that failure (neither in the recording up to the
  point nor by the agent before the re-run), and it failed again; else 0.
- ``redo_N``: 1 when, within N calls, the agent repeated work the recording shows done before the
  point: re-read a file already read and not modified since, or re-applied an identical edit.
- ``stops``: only where the recording ends within N calls after the point (fewer than N recorded
  calls remain): 1 when the agent ended on its own within N calls, 0 when it kept going.
- ``first_action_match``: 1 when the agent's first action is the recorded next action (same
  normalized command, same file read, same files modified, or the identical call), **or a later
  recorded action reached by skipping only recorded steps that repeat work done before the point
  with nothing modified since** (:func:`acceptable_first`): an agent whose context shows that a
  re-read or re-run is redundant may skip it, so more information can never score worse.
  Stopping at once matches a recording with no further calls, or one whose remaining calls are
  all such repeats.
- ``calls_used``: calls the agent made (at most N).
- ``unanswerable_share``: share of its calls the replay environment could not answer (no row when
  it made none).

An agent error makes every metric of that continuation NaN with the error text, never a zero.
The same refail/redo/calls rules score the real agent's recorded calls after a real compaction
(:mod:`evalkit.continuation.observational`).
"""

from __future__ import annotations

import re

from evalkit.continuation.agents import Step, Transcript
from evalkit.continuation.recording import SessionRecord

BEHAVIOUR = ("refail", "redo", "stops", "first_action_match", "calls_used", "unanswerable_share")
_METRIC = re.compile(r"^(?:refail|redo)_\d+$|^(?:stops|first_action_match|calls_used|unanswerable_share)$")
# Direction of each metric for readers of the table ("lower" is better for refail/redo).
DIRECTIONS = {
    "refail": "lower",
    "redo": "lower",
    "stops": "higher",
    "first_action_match": "higher",
    "calls_used": "-",
    "unanswerable_share": "lower",
}


# What each metric measures and the failure it catches, for readers of reports.
MEANINGS = {
    "refail": (
        "re-runs, within N calls after the compaction, a command that failed before it with nothing changed since, "
        "and it fails again",
        "the agent repeats a known failure because the compacted context lost it",
    ),
    "redo": (
        "repeats, within N calls, work the recording shows done: re-reads an unchanged file, re-applies an edit",
        "finished work redone because the context no longer shows it",
    ),
    "stops": (
        "where the recording ends within N calls: the agent ends too, rather than going on",
        "an agent that no longer knows the task is done",
    ),
    "first_action_match": (
        "the agent's first action after the compaction is the recorded next action",
        "a context that no longer says what comes next",
    ),
    "calls_used": ("tool calls the agent made after the compaction (at most N)", ""),
    "unanswerable_share": (
        "share of the agent's calls the replay environment could not answer from the recording",
        "continuations that wander off the recording (their other numbers mean less)",
    ),
}


def metric_info(name: str) -> tuple[str, str, str] | None:
    """(direction, what it measures, what it catches) of a continuation metric, None for others."""
    if not is_continuation_metric(name):
        return None
    base = name.rsplit("_", 1)[0] if name.startswith(("refail_", "redo_")) else name
    measures, catches = MEANINGS[base]
    return DIRECTIONS[base], measures, catches


def metric_names(n: int) -> list[str]:
    """The metric names for a budget of ``n`` calls (``refail_30`` for the default)."""
    return [f"{m}_{n}" if m in ("refail", "redo") else m for m in BEHAVIOUR]


def is_continuation_metric(name: str) -> bool:
    """Whether a metrics-table name is one this stage writes (used to replace earlier rows)."""
    return bool(_METRIC.match(name))


def refail_redo(rec: SessionRecord, at: int, steps: list[Step]) -> tuple[int, int]:
    """Counts of re-fails and redos among ``steps`` (already cut to N) after point ``at``."""
    open_failures = {a.op.command: a for a in rec.open_failures(at)}
    pre_edits = {a.op.signature for a in rec.before(at) if a.op.kind == "modify"}
    touched_any, touched = False, set()
    refails = redos = 0
    for s in steps:
        op = s.op
        failure = open_failures.get(op.command) if op.command is not None else None
        if (
            failure is not None
            and s.answer.failed
            and not rec.failure_changed(failure, at, touched_any, touched)
        ):
            refails += 1
        if op.kind == "modify":
            redos += op.signature in pre_edits
        else:
            for p in op.reads:
                last = rec.last_read(p, at)
                if last is not None and p not in touched and not rec.modified_between(last.index, at, p):
                    redos += 1
                    break
        if op.kind == "modify" or op.modifies:
            touched_any = True
            touched.update(op.modifies)
    return refails, redos


def _repeats_unchanged(rec: SessionRecord, at: int, op) -> bool:
    """Whether a recorded step after ``at`` repeats one before it with nothing modified since."""
    if op.kind == "modify":
        return op.signature in {a.op.signature for a in rec.before(at) if a.op.kind == "modify"}
    if op.kind == "read":
        last = rec.last_read(op.reads[0], at)
    elif op.kind == "shell":
        last = rec.latest_run(op.command or "", at)
    else:
        return False
    return last is not None and not rec.modified_between(last.index, at)


def acceptable_first(rec: SessionRecord, at: int) -> set:
    """First-action keys that match the recording: the recorded next actions up to and including
    the first that does not repeat earlier work (None, i.e. stopping, when all of them do)."""
    keys: set = set()
    for a in rec.after(at):
        keys.add(a.op.key())
        if not _repeats_unchanged(rec, at, a.op):
            return keys
        if a.op.kind == "modify" or a.op.modifies:
            return keys  # a repeated edit still changes what follows: stop widening here
    keys.add(None)
    return keys


def continuation_metrics(
    rec: SessionRecord, at: int, transcript: Transcript, n: int
) -> list[tuple[str, float, str | None]]:
    """(metric, value, error) rows for one continuation; see the module docstring for definitions."""
    names = metric_names(n)
    if transcript.error:
        return [(m, float("nan"), transcript.error) for m in names]
    steps = transcript.steps[:n]
    refails, redos = refail_redo(rec, at, steps)
    future = rec.after(at)
    out: list[tuple[str, float, str | None]] = [
        (f"refail_{n}", float(refails > 0), None),
        (f"redo_{n}", float(redos > 0), None),
    ]
    if len(future) < n:
        out.append(("stops", float(transcript.stopped and len(transcript.steps) <= n), None))
    first = steps[0].op.key() if steps else None
    out.append(("first_action_match", float(first in acceptable_first(rec, at)), None))
    out.append(("calls_used", float(len(steps)), None))
    if steps:
        unanswered = sum(not s.answer.answered for s in steps)
        out.append(("unanswerable_share", unanswered / len(steps), None))
    return out
