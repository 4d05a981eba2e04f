"""The source step: what the summarizer sees of the head, within seed 003's summary-source
budget, and the stub rules for a message that can never fit."""

from __future__ import annotations

from evalkit.replay.job import Pass
from evalkit.replay.render import STUB_MARKER, stub

MIN_STUB = len(STUB_MARKER) + 16  # seed 003: a stub "succeeds" once its wrapper and marker fit


def stub_if_room(size: int, room: int) -> bool:
    """Seed 003's original rule: stub a never-fit message whenever wrapper and marker fit."""
    return room >= MIN_STUB


def stub_if_empty(size: int, room: int) -> bool:
    """Seed 003's fix: stub a never-fit message only when the source is still empty."""
    return size == 0


def fill_source(p: Pass) -> None:
    """Render the head oldest first into the summary source, up to its budget.

    A message that does not fit the rest of the budget but would fit a fresh source stays in
    the context for the next pass (prefer-keep). One that can never fit is stubbed or left,
    as ``policy.stub_rule`` says; what a stub cuts is loss, not policy.
    """
    budget, variant = p.job.settings.summary_source_chars, p.policy.renderer
    size, stop, acts = 0, len(p.activity), p.activity
    render, taken = p.job.renders.get, p.taken  # looked up once: a head is thousands of messages
    for k, m in enumerate(acts):
        r = render(m, variant)
        sep = 2 if taken else 0
        if not budget or size + sep + len(r.text) <= budget:
            taken.append((m, r, None))
            size += sep + len(r.text)
            continue
        room = budget - size - sep
        if len(r.text) > budget and p.policy.stub_rule(size, room):
            room = budget if size == 0 else room
            p.taken.append((m, stub(r, room), room))
            size += sep + min(room, len(r.text))
            stop = k + 1
            # A stubbed call takes its results along, so the cut cannot orphan them.
            while stop < len(acts) and acts[stop].tool_results():
                p.taken.append((acts[stop], stub(p.job.renders.get(acts[stop], variant), 0), 0))
                stop += 1
        else:
            stop = k
            # Never cut between a call and its result: leave the whole exchange for the next pass.
            while 0 < stop < len(acts) and acts[stop].tool_results():
                stop -= 1
                p.taken.pop()
        break
    p.tail = acts[stop:] + p.job.context[p.cut :]
    p.source_chars = size
