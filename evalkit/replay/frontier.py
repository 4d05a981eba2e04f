"""Replay without the pipeline's side effects, with a client that may decline a call.

Two things walk the corpus this way: the cost plan (``evalkit.pipeline.plan``), whose client answers from
the call cache or with a stand-in summary of an assumed length, and provider batch jobs
(``evalkit.replay.batch``), whose client answers from the cache and raises :class:`Pending` for
anything else, so each walk collects the next compaction round of every (session, arm) as one
batch. Both use the engine's own ``replay_session``: the requests they see are exactly the ones a
real replay would send, as far as the answers before them are the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from evalkit.contracts.config import ModelConfig, ReplayConfig
from evalkit.contracts.event import Event
from evalkit.contracts.session import Session
from evalkit.replay.engine import SessionCache, replay_session
from evalkit.replay.settings import ReplaySettings


class Pending(Exception):
    """The walking client has no answer for this request yet: stop this (session, arm) here."""


@dataclass
class Walk:
    """What one walk produced: the events of every (session, arm) that ran to its end, and the
    (session, arm, replicate) triples that stopped at a pending request."""

    events: dict[str, list[Event]] = field(default_factory=dict)
    pending: list[tuple[str, str, int]] = field(default_factory=list)


def walk(
    sessions: Iterable[Session], arms: list[str], replay: ReplayConfig, model: ModelConfig, client
) -> Walk:
    """Replay every session under every arm and replicate with ``client`` (in this process).

    Before each (session, arm) the client's ``arm`` attribute is set (if it has one), so it can
    attribute the requests it sees."""
    settings = ReplaySettings.from_section(replay)
    n_reps = model.replicates
    out = Walk({a: [] for a in arms})
    for session in sessions:
        cache = SessionCache(session, settings.tokenizer)
        if hasattr(client, "session"):
            client.session = session.id
        for arm in arms:
            if hasattr(client, "arm"):
                client.arm = arm
            for r in range(n_reps):
                try:
                    out.events[arm].extend(replay_session(session, arm, settings, model, client, cache, r))
                except Pending:
                    out.pending.append((session.id, arm, r))
    return out
