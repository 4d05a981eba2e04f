"""Replay settings, read from the experiment's ``[replay]`` table."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ReplaySettings:
    """Context-window geometry and trigger. Defaults are the reference compactor's (REFERENCES.md §1.A)."""

    window: int = 200_000
    reserve: int = 16_384
    keep_recent: int = 20_000
    summary_max_tokens: int = 4_096
    trigger: str = "tokens"  # tokens | messages | recorded
    max_messages: int = 40
    tokenizer: str = "chars4"

    @property
    def threshold(self) -> int:
        """Compaction fires when the context exceeds this many tokens (strict >)."""
        return self.window - self.reserve

    @classmethod
    def from_section(cls, section: dict) -> ReplaySettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in section.items() if k in known})
