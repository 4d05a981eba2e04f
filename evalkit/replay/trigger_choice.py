"""Which compaction trigger a corpus needs, from its sessions' sizes.

Real sessions of a few hundred messages never reach a 200,000-token window: under the default
token trigger nothing compacts and there is nothing to judge. The choice here is the one
``evalkit init`` writes and the run's warnings suggest.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

CHARS_PER_TOKEN = 4  # the chars4 estimate the corpus manifest's bytes are read with
ENOUGH = 0.5  # the token trigger is kept when at least this share of sessions reaches it


@dataclass(frozen=True)
class TriggerChoice:
    trigger: str  # "tokens" or "messages"
    max_messages: int  # for "messages"
    reaching: int  # sessions whose estimated size passes the token threshold
    sessions: int
    largest_tokens: int
    median_messages: int

    def settings(self) -> dict:
        """The [replay] keys to set."""
        return (
            {"trigger": "messages", "max_messages": self.max_messages} if self.trigger == "messages" else {}
        )

    def toml(self) -> str:
        return (
            f'trigger = "messages"\nmax_messages = {self.max_messages}'
            if self.trigger == "messages"
            else 'trigger = "tokens"'
        )


def choose_trigger(rows: list[dict], threshold: int) -> TriggerChoice:
    """The trigger for sessions described by manifest rows (``messages``, ``bytes``): tokens when
    most sessions pass ``threshold`` (window - reserve), else a message count that about half the
    messages of the median session reach, so a typical session compacts a few times."""
    tokens = [int(r.get("bytes", 0)) // CHARS_PER_TOKEN for r in rows]
    messages = [int(r.get("messages", 0)) for r in rows]
    reaching = sum(t > threshold for t in tokens)
    median = int(statistics.median(messages)) if messages else 0
    use_tokens = bool(rows) and reaching >= ENOUGH * len(rows)
    return TriggerChoice(
        "tokens" if use_tokens else "messages",
        max(4, median // 2),
        reaching,
        len(rows),
        max(tokens, default=0),
        median,
    )
