"""Model-call values: a request is a plain value whose canonical hash keys the call cache."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

# Bumped when the canonical form changes, so old cache rows can never be mistaken for new ones.
KEY_VERSION = "evalkit.request/1"


@dataclass(frozen=True)
class ChatRequest:
    """Everything that affects a model's answer. Two equal requests are one call.

    ``replicate`` is part of the key so that K samples of the same prompt are K calls
    (results vary across replicates even at temperature 0). ``extra`` holds any other sampling
    parameter sent to the endpoint (``top_p``, ``stop``, ``response_format``...); it is keyed too.
    """

    model: str
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    replicate: int = 0
    purpose: str = "summarize"  # summarize | judge | answer | agent: which role the call plays
    extra: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["messages"] = list(self.messages)
        d["tools"] = list(self.tools)
        d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChatRequest:
        """Inverse of :meth:`to_dict` (for cache export and re-scoring)."""
        d = dict(d)
        d["messages"] = tuple(d.get("messages", ()))
        d["tools"] = tuple(d.get("tools", ()))
        d["extra"] = tuple(sorted((d.get("extra") or {}).items()))
        return cls(**d)

    @cached_property
    def _canonical(self) -> str:
        # Requests are immutable and keyed several times each (cache, memo, event), so the
        # ~100 KB serialisation is done once.
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    def canonical(self) -> str:
        """Key-order- and spacing-independent JSON of the request."""
        return self._canonical

    def key(self, backend: str = "", base_url: str = "") -> str:
        """Cache key: sha256 over the canonical request and who answers it (backend + endpoint).

        The endpoint is part of the key (as in Inspect AI): the same model name behind two base
        URLs may be two different models.
        """
        memo = self._keys
        key = memo.get((backend, base_url))
        if key is None:
            scope = f"{KEY_VERSION}\n{backend}\n{base_url.rstrip('/')}\n"
            key = memo[(backend, base_url)] = hashlib.sha256((scope + self.canonical()).encode()).hexdigest()
        return key

    @cached_property
    def _keys(self) -> dict[tuple[str, str], str]:
        # The client keys a request, then the backend again for its log header: hash it once.
        return {}


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
    cost_usd: float | None = None
    key: str = ""
    attempts: int = 1
    #: The endpoint's finish_reason; "length" marks a cut-off answer, never a usable one.
    finish_reason: str | None = None
    #: Why the endpoint's token counts were not used (negative, over 2^63): the cost is unknown.
    usage_error: str | None = None
    #: The model the endpoint says answered (its ``model`` field), when it said.
    served_model: str | None = None

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and self.finish_reason != "length"
            and (bool(self.text) or bool(self.tool_calls))
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChatResponse:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})
