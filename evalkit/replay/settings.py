"""Replay settings, read from the experiment's ``[replay]`` table."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

TRIGGERS = ("tokens", "messages", "recorded", "once")
# Summarizer request layouts: "reference" is the reference compactor's (instructions in the system
# message, previous summary before the new activity); "prefix" puts what arms and rounds share first
# and each arm's instructions last, so a provider's prompt-prefix cache can serve the shared part.
LAYOUTS = ("reference", "prefix")


@dataclass(frozen=True)
class ReplaySettings:
    """Context-window geometry and trigger. Defaults are the reference compactor's (REFERENCES.md §1.A).

    ``summary_source_chars`` is a summary-source budget in characters, 0 (the default) for none:
    the reference compactor hands the summarizer the whole head. Seed 003's count-based compactor
    has a 64 KiB budget (``experiments/seed003.toml``): the rendered head is filled oldest first up
    to it, and a message that does not fit stays in the context for the next pass.
    """

    window: int = 200_000
    reserve: int = 16_384
    keep_recent: int = 20_000
    summary_max_tokens: int = 4_096
    trigger: str = "tokens"  # tokens | messages | recorded | once
    # trigger = "once": compact exactly once, at the first turn boundary at or after this fraction of
    # the session's messages (1.0: at its end), so every arm is asked at the same point
    once_at: float = 1.0
    max_messages: int = 40
    keep_messages: int = 0  # trigger = "messages": messages kept after a compaction (0: max_messages // 2)
    summary_source_chars: int = 0
    tokenizer: str = "chars4"
    external_timeout: float = 60.0  # seconds per compaction for external:CMD candidates
    request_layout: str = "reference"  # reference | prefix (docs/models.md): the same for every arm
    # Arms defined by settings (evalkit.replay.variants): name -> their table.
    variants: dict | None = field(default=None, hash=False, compare=False)

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise ValueError(f"replay.trigger: {self.trigger!r} is not one of {', '.join(TRIGGERS)}")
        if not 0.0 < float(self.once_at) <= 1.0:
            raise ValueError(f"replay.once_at: {self.once_at!r} is not a fraction in (0, 1]")
        if self.request_layout not in LAYOUTS:
            raise ValueError(
                f"replay.request_layout: {self.request_layout!r} is not one of {', '.join(LAYOUTS)}"
            )

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
