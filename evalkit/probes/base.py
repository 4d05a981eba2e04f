"""The probe contract and registry.

A probe is a function ``(ProbeInput, **params) -> list[ProbeValue]`` registered by name with the
metrics it emits, each metric's direction, and the failure it catches. Its keyword parameters (with
their defaults) are what a suite file may set. Probes read the event through :class:`ProbeInput`,
whose text views are cached: per message in a :class:`SessionView` shared by every event and arm of
one session (kept recorded messages are the same objects across arms), and per event for the joined
visible text, so no probe re-renders what another already rendered.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.events import Event, resolve_context
from evalkit.facts import Facts
from evalkit.registry import Registry
from evalkit.render import message_plain_text
from evalkit.session import Message, Session

DIRECTIONS = ("higher", "lower", "info")  # "info": a descriptive covariate, not a quality score

_NON_WORD = re.compile(r"[^\w\s]")


# ASCII text (nearly all of it) folds punctuation with str.translate, ~10x faster than the regex.
_ASCII_PUNCT = str.maketrans(
    {c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_" or c.isspace())}
)


def normalize(text: str) -> str:
    """Case, whitespace and punctuation folded, for normalized matching."""
    if text.isascii():
        return " ".join(text.lower().translate(_ASCII_PUNCT).split())
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def fold_ws(text: str) -> str:
    """Whitespace runs folded to one space (so a wrapped line still matches)."""
    return " ".join(text.split())


class SessionView:
    """One session with per-message caches, shared by all of its events under every arm."""

    def __init__(self, session: Session, facts: Facts):
        self.session = session
        self.facts = facts
        self.by_id: dict[str, Message] = {m.id: m for m in session.messages}
        self.index: dict[str, int] = {m.id: i for i, m in enumerate(session.messages)}
        self._cache: dict[tuple, Any] = {}
        self.extras: dict[str, Any] = {}  # run-level inputs: the score context, pinned questions

    def memo(self, key: tuple, fn: Callable[[], Any]) -> Any:
        """``fn()`` memoized under ``key`` for the life of this session's scoring."""
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def cached(self, msg: Message, kind: str, fn: Callable[[Message], Any], recorded: bool = True) -> Any:
        """``fn(msg)`` memoized per (message id, kind) for recorded messages."""
        if not recorded:
            return fn(msg)
        return self.memo((msg.id, kind), lambda: fn(msg))


@dataclass
class ProbeInput:
    """One event with what a probe may read: the session, its facts, and the arm's other events."""

    event: Event
    view: SessionView
    previous: list[Event] = field(default_factory=list)  # the arm's earlier events of this session
    later: list[Event] = field(default_factory=list)  # the arm's later events of this session
    _context: list[tuple[Message, bool]] | None = None
    _memo: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        event: Event,
        session: Session,
        facts: Facts,
        previous: list[Event] | None = None,
        later: list[Event] | None = None,
    ) -> ProbeInput:
        """Convenience for one-off use (tests); scoring shares one :class:`SessionView` per session."""
        return cls(event, SessionView(session, facts), list(previous or []), list(later or []))

    @property
    def session(self) -> Session:
        return self.view.session

    @property
    def facts(self) -> Facts:
        return self.view.facts

    @property
    def is_last(self) -> bool:
        """The arm's last event of this session: where session-level metrics are emitted."""
        return not self.later

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """Per-event cache for values several probes derive (the visible text, its lines...)."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def context_entries(self) -> list[tuple[Message, bool]]:
        """(message, recorded) for the post-compaction context, in order."""
        if self._context is None:
            refs = [("ref" in e) for e in self.event.new_context]
            self._context = list(zip(resolve_context(self.event, self.view.by_id), refs, strict=True))
        return self._context

    def context(self) -> list[Message]:
        return [m for m, _ in self.context_entries()]

    def kept_ids(self) -> set[str]:
        """Recorded messages kept verbatim in the new context."""
        return self.memo("kept_ids", lambda: {e["ref"] for e in self.event.new_context if "ref" in e})

    def message_texts(self) -> list[str]:
        """Each context message as the model reads it (cached per recorded message)."""
        return self.memo(
            "texts",
            lambda: [
                self.view.cached(m, "plain", message_plain_text, rec) for m, rec in self.context_entries()
            ],
        )

    def visible_text(self) -> str:
        """Everything the model sees after the compaction: summary, carried texts and kept tail."""
        return self.memo("visible", lambda: "\n\n".join(self.message_texts()))

    def visible_folded(self) -> str:
        """The visible text with whitespace runs folded (a line re-wrapped still matches)."""
        return self.memo(
            "folded",
            lambda: "\n".join(
                self.view.cached(m, "folded", lambda x: fold_ws(message_plain_text(x)), rec)
                for m, rec in self.context_entries()
            ),
        )

    def visible_normalized(self) -> str:
        """The visible text with case, whitespace and punctuation folded."""
        return self.memo(
            "normalized",
            lambda: "\n".join(
                self.view.cached(m, "norm", lambda x: normalize(message_plain_text(x)), rec)
                for m, rec in self.context_entries()
            ),
        )


@dataclass(frozen=True)
class ProbeValue:
    """A metric value from a probe; ``value`` None with ``error`` set when it could not be scored.

    ``session_level`` values describe the whole (session, arm) and are written with
    ``event = round = -1`` (docs/contracts.md).
    """

    metric: str
    value: float | None
    error: str | None = None
    session_level: bool = False


Probe = Callable[..., list[ProbeValue]]
PROBES: Registry[Probe] = Registry("probe")


def probe(
    name: str,
    description: str,
    metrics: dict[str, str],
    catches: str,
    needs_summary: bool = True,
    **info: Any,
):
    """Register a probe.

    ``metrics`` maps each metric it emits to its direction ("higher"/"lower" is better, or "info"
    for a descriptive covariate). With ``needs_summary`` the scorer turns the probe's event-level
    values into error rows (NaN + the summarizer's error) on events whose summary failed: a failed
    compaction has no summary to score, and must never count as a zero or as a success.
    """
    bad = {m: d for m, d in metrics.items() if d not in DIRECTIONS}
    if bad:
        raise ValueError(f"probe {name!r}: unknown direction(s) {bad} (use {DIRECTIONS})")

    def deco(fn: Probe) -> Probe:
        params = {
            p.name: p.default
            for p in list(inspect.signature(fn).parameters.values())[1:]
            if p.default is not inspect.Parameter.empty
        }
        PROBES.add(
            name,
            fn,
            description,
            metrics=metrics,
            catches=catches,
            needs_summary=needs_summary,
            params=params,
            doc=inspect.getdoc(fn) or "",
            **info,
        )
        return fn

    return deco
