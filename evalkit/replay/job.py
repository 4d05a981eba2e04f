"""The records a compaction works on: the engine's request (:class:`Job`), the steps' shared
working record (:class:`Pass`) and what a compactor returns (:class:`Outcome`), with the meta keys
that mark the messages a compactor makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.contracts.session import Message, message_chars
from evalkit.models import Backend, ChatRequest, ChatResponse
from evalkit.replay.render import RenderCache, Rendered
from evalkit.replay.settings import ReplaySettings

# A step receives the arm's evalkit.replay.compactor.Policy, typed Any here: the compactor imports
# this module, and importing it back (even for type checking) would make a cycle.
Policy = Any

# Meta keys on the messages the compactor makes (none of them is a recorded message).
SUMMARY_META = "evalkit_summary"  # the summary text alone, what the next summarizer sees
USERS_META = "evalkit_users"  # user texts carried verbatim
UNSEEN_META = "evalkit_users_unseen"  # per carried text: chars of it no summarizer saw in full
FILES_META = "evalkit_files"  # {"read": [...], "modified": [...]} carried deterministically
CARRY_FILES_META = "evalkit_carry_files"  # plugin-carry texts by file name (seed 002)


def is_made(msg: Message) -> bool:
    """A message a compactor made (summary or carry), as opposed to a recorded one."""
    return any(k in msg.meta for k in (SUMMARY_META, USERS_META))


@dataclass
class Job:
    """One compaction request from the engine: the context and what the compactor may use."""

    context: list[Message]
    round: int
    settings: ReplaySettings
    client: Backend
    model: str
    replicate: int = 0
    backend_name: str = ""
    session_id: str = ""
    session_meta: dict[str, Any] = field(default_factory=dict)
    renders: RenderCache = field(default_factory=RenderCache)
    tokens: Callable[[Message], int] = lambda m: -(-message_chars(m) // 4)
    memo: dict[str, ChatResponse] = field(default_factory=dict)  # equal requests are one call
    order: dict[str, int] = field(default_factory=dict)  # session index of each recorded message
    state: dict[str, Any] = field(default_factory=dict)  # per (session, arm), kept across rounds
    # The engine's running ``sum(tokens(m) for m in context)``; None: a step counts it itself.
    context_tokens: int | None = None

    def tokens_in_context(self) -> int:
        """The context's size in tokens, without a pass over it when the engine kept the count
        (the ceiling arm asks at every turn boundary: summing a 3,000-message context each time
        was half of the default run's replay CPU)."""
        if self.context_tokens is None:
            return sum(self.tokens(m) for m in self.context)
        return self.context_tokens


@dataclass
class Outcome:
    """What a compactor returns. ``accounting`` maps each message that left the view to
    (characters shown verbatim to a summarizer or carried, characters elided by policy)."""

    new_context: list[Message]
    summary: str = ""
    summary_error: str | None = None
    request: ChatRequest | None = None
    recipe: list[Any] | None = None  # the user prompt as parts (see evalkit.replay.requests)
    carried: list[str] = field(default_factory=list)
    accounting: dict[str, tuple[int, int]] = field(default_factory=dict)
    source_chars: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    deferred_lost: int = 0  # unseen chars of carried texts that left the carry in this compaction
    request_key: str | None = None


@dataclass
class Pass:
    """The working record the steps of one compaction read and fill."""

    job: Job
    policy: Policy
    cut: int = 0
    system: list[Message] = field(default_factory=list)
    previous: Message | None = None  # the earlier compaction's summary message, leaving the view
    leaving_made: list[Message] = field(default_factory=list)  # earlier summary/carry messages
    activity: list[Message] = field(default_factory=list)  # recorded head, oldest first
    taken: list[tuple[Message, Rendered, int | None]] = field(
        default_factory=list
    )  # (msg, render, stub room)
    tail: list[Message] = field(default_factory=list)
    source_chars: int = 0
    summary: str = ""
    carried: list[str] = field(default_factory=list)
    plugin_texts: dict[str, str] = field(default_factory=dict)

    @property
    def leaving(self) -> list[Message]:
        """Messages leaving the view, in model order (what a carry hook receives)."""
        return [*self.leaving_made, *(m for m, _, _ in self.taken)]
