"""Continuation agents, registered by name: each acts from a compacted context in the replay environment.

An agent is built by its registry entry's factory ``factory(settings, run_dir=None, client=None)``
and called as ``agent(inp, env) -> Transcript``. Entries say in ``info["proxy"]`` whether their
output measures a model's behaviour (False) or only what information the context holds (True);
every output of a proxy agent carries that label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from evalkit.common.plaintext import context_plain_text, message_plain_text
from evalkit.common.registry import Registry
from evalkit.common.toolcalls import Op
from evalkit.continuation.environment import Answer, ReplayEnvironment
from evalkit.continuation.recording import SessionRecord
from evalkit.contracts.config import ContinuationConfig, ModelConfig
from evalkit.contracts.event import Event, resolve_context
from evalkit.contracts.session import Message, ToolCall

MAX_CALLS = ContinuationConfig().max_calls  # [continuation] max_calls: its default lives there

@dataclass(frozen=True, slots=True)
class Step:
    """One call the agent made and the environment's answer."""

    call: ToolCall
    op: Op
    answer: Answer


@dataclass
class Transcript:
    """What an agent did: its calls in order, whether it ended on its own, or the error that stopped it."""

    steps: list[Step] = field(default_factory=list)
    stopped: bool = False
    error: str | None = None


@dataclass
class ContinuationInput:
    """One continuation: a compacted context at message index ``at`` of a recorded session."""

    record: SessionRecord
    at: int
    context: list[Message]
    kept_ids: frozenset[str]  # recorded messages the context holds verbatim
    max_calls: int = MAX_CALLS
    replicate: int = 0
    texts: dict[str, str] | None = None  # plain text per recorded message id, shared across events
    _visible: str | None = None
    _folded: str | None = None

    @classmethod
    def from_event(
        cls,
        event: Event,
        record: SessionRecord,
        by_id: dict[str, Message],
        max_calls: int = MAX_CALLS,
        texts: dict[str, str] | None = None,
        masked: dict[str, Message] | None = None,
    ) -> ContinuationInput:
        # A masked copy keeps the call but not its output: it does not show the outcome.
        kept = frozenset(e["ref"] for e in event.new_context if "ref" in e and not e.get("mask"))
        context = resolve_context(event, by_id, masked)
        return cls(record, event.at_message, context, kept, max_calls, event.replicate, texts)

    def visible_text(self) -> str:
        """Everything the model sees after the compaction, as plain text (same as the probes' view)."""
        if self._visible is None:
            if self.texts is None:
                self._visible = context_plain_text(self.context)
            else:
                parts = []
                for m in self.context:
                    if m.id in self.kept_ids:
                        if m.id not in self.texts:
                            self.texts[m.id] = message_plain_text(m)
                        parts.append(self.texts[m.id])
                    else:
                        parts.append(message_plain_text(m))
                self._visible = "\n\n".join(parts)
        return self._visible

    def visible_folded(self) -> str:
        """The visible text with whitespace runs folded (for matching quoted lines)."""
        if self._folded is None:
            self._folded = " ".join(self.visible_text().split())
        return self._folded


Agent = Callable[[ContinuationInput, ReplayEnvironment], Transcript]
AgentFactory = Callable[..., Agent]
AGENTS: Registry[AgentFactory] = Registry(
    "agent",
    {
        "heuristic": "evalkit.continuation.agents.heuristic:make_heuristic",
        "openai": "evalkit.continuation.agents.model_agent:make_model_agent",
    },
)


def make_agent(
    name: str, settings: ContinuationConfig, model: ModelConfig, run_dir=None, client=None
) -> Agent:
    """Build the agent registered as ``name`` from ``[continuation]`` and the model it calls
    (``[model]`` with ``[continuation.model]`` on top; ``client`` replaces its client, for tests)."""
    return AGENTS.get(name)(settings, model, run_dir=run_dir, client=client)


def is_proxy(name: str) -> bool:
    """True for agents whose numbers measure information availability, not a model's behaviour."""
    return bool(AGENTS.entry(name).info.get("proxy"))
