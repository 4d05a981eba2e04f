"""The probe contract and registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from evalkit.events import Event, resolve_context
from evalkit.facts import Facts
from evalkit.registry import Registry
from evalkit.render import context_plain_text
from evalkit.session import Message, Session


@dataclass
class ProbeInput:
    """One event with what a probe may read: the session, its facts, and the arm's earlier events."""

    event: Event
    session: Session
    facts: Facts
    previous: list[Event] = field(default_factory=list)
    _by_id: dict[str, Message] | None = None
    _visible: str | None = None

    @property
    def by_id(self) -> dict[str, Message]:
        if self._by_id is None:
            self._by_id = {m.id: m for m in self.session.messages}
        return self._by_id

    def context(self) -> list[Message]:
        return resolve_context(self.event, self.by_id)

    def visible_text(self) -> str:
        """Everything the model sees after the compaction: summary, carried texts and kept tail."""
        if self._visible is None:
            self._visible = context_plain_text(self.context())
        return self._visible


@dataclass(frozen=True)
class ProbeValue:
    """A metric value from a probe; ``value`` None with ``error`` set when it could not be scored."""

    metric: str
    value: float | None
    error: str | None = None


Probe = Callable[[ProbeInput], list[ProbeValue]]
PROBES: Registry[Probe] = Registry("probe")


def probe(name: str, description: str, metrics: dict[str, str], catches: str):
    """Register a probe. ``metrics`` maps each metric it emits to its direction ("higher"/"lower")."""
    return PROBES.register(name, description, metrics=metrics, catches=catches)
