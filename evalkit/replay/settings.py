"""Replay settings, read from the experiment's ``[replay]`` table."""

from __future__ import annotations

from dataclasses import dataclass, fields

TRIGGERS = ("tokens", "messages", "recorded")


@dataclass(frozen=True)
class ReplaySettings:
    """Context-window geometry and trigger. Defaults are the reference compactor's (REFERENCES.md §1.A).

    ``summary_source_chars`` is the summary-source budget of seed 003 (64 KiB): the rendered head
    handed to the summarizer is filled oldest first up to it; a message that does not fit stays
    in the context for the next pass. 0 means no budget.
    """

    window: int = 200_000
    reserve: int = 16_384
    keep_recent: int = 20_000
    summary_max_tokens: int = 4_096
    trigger: str = "tokens"  # tokens | messages | recorded
    max_messages: int = 40
    keep_messages: int = 0  # trigger = "messages": messages kept after a compaction (0: max_messages // 2)
    summary_source_chars: int = 65_536
    tokenizer: str = "chars4"
    external_timeout: float = 60.0  # seconds per compaction for external:CMD candidates

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise ValueError(f"replay.trigger: {self.trigger!r} is not one of {', '.join(TRIGGERS)}")

    @property
    def threshold(self) -> int:
        """Compaction fires when the context exceeds this many tokens (strict >)."""
        return self.window - self.reserve

    @property
    def kept_messages(self) -> int:
        return self.keep_messages or max(1, self.max_messages // 2)

    @classmethod
    def from_section(cls, section: dict) -> ReplaySettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in section.items() if k in known})
