"""Replay settings, read from the experiment's ``[replay]`` table."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from evalkit.contracts.config import TRIGGERS, ReplayConfig

# Summarizer request layouts: "reference" is the reference compactor's (instructions in the system
# message, previous summary before the new activity); "prefix" puts what arms and rounds share first
# and each arm's instructions last, so a provider's prompt-prefix cache can serve the shared part.
LAYOUTS = ("reference", "prefix")
_D = ReplayConfig()  # the defaults are [replay]'s (evalkit.contracts.config), never restated here


@dataclass(frozen=True)
class ReplaySettings:
    """Context-window geometry and trigger, one arm's (:func:`evalkit.replay.variants.settings_for`).
    Defaults are ``[replay]``'s, the reference compactor's (REFERENCES.md §1.A).

    ``summary_source_chars`` is a summary-source budget in characters, 0 (the default) for none:
    the reference compactor hands the summarizer the whole head. Seed 003's count-based compactor
    has a 64 KiB budget (``experiments/seed003.toml``): the rendered head is filled oldest first up
    to it, and a message that does not fit stays in the context for the next pass.
    """

    window: int = _D.window
    reserve: int = _D.reserve
    keep_recent: int = _D.keep_recent
    summary_max_tokens: int = _D.summary_max_tokens
    trigger: str = _D.trigger  # tokens | messages | recorded | once
    once_at: float = _D.once_at  # trigger = "once": the fraction of the session's messages
    max_messages: int = _D.max_messages
    keep_messages: int = _D.keep_messages  # trigger = "messages": kept after a compaction (0: max_messages // 2)
    summary_source_chars: int = _D.summary_source_chars
    tokenizer: str = _D.tokenizer
    external_timeout: float = _D.external_timeout  # seconds per compaction for external:CMD candidates
    request_layout: str = _D.request_layout  # reference | prefix (docs/models.md): the same for every arm
    # Arms defined by settings (evalkit.replay.variants): name -> their table.
    variants: dict | None = field(default=None, hash=False, compare=False)

    def __post_init__(self) -> None:
        # Variants change the geometry per arm (settings_for), after [replay] was validated.
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
    def from_section(cls, section: ReplayConfig) -> ReplaySettings:
        """The settings ``[replay]`` gives every arm (variants change them per arm)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in section.model_dump().items() if k in known})
