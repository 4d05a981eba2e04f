"""Model-call values: a request is a plain value whose canonical hash keys the call cache."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChatRequest:
    """Everything that affects a model's answer. Two equal requests are one call.

    ``replicate`` is part of the key so that K samples of the same prompt are K calls
    (results vary across replicates even at temperature 0).
    """

    model: str
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    replicate: int = 0
    purpose: str = "summarize"  # summarize | judge | answer | agent: which role the call plays

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["messages"] = list(self.messages)
        d["tools"] = list(self.tools)
        return d

    def canonical(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    def key(self, backend: str = "") -> str:
        """Cache key: sha256 over the canonical request and the backend that answers it."""
        return hashlib.sha256((backend + "\n" + self.canonical()).encode()).hexdigest()


@dataclass
class ChatResponse:
    """A model's answer, or the error that replaced it (``text`` is then None, never "")."""

    text: str | None
    backend: str
    model: str
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    cached: bool = False
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None
