"""What the fake server does to a request: its fault plan (rates, a scripted sequence, how each
fault behaves, drawn deterministically per attempt) and its scripted answers (rules matched on
the request's text). The server is :mod:`evalkit.testing.fakeserver`."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# New faults go at the end: the per-request draw walks this order, so earlier rates keep their draws.
FAULTS = ("latency", "429", "500", "drop", "timeout", "malformed", "empty", "refusal", "length")
REFUSAL_TEXT = "I'm sorry, but I can't help with that."


@dataclass
class FaultPlan:
    """Fault rates per request and how each fault behaves."""

    rates: dict[str, float] = field(default_factory=dict)
    latency_s: float = 0.0  # added to every answer
    fault_latency_s: float = 1.0  # extra, for the ``latency`` fault
    retry_after: str = "1"
    hang_s: float = 30.0
    seed: int = 0
    #: Attempt ``i`` of every request meets ``sequence[i]`` (then the rates apply): a scripted path
    #: through several faults, e.g. ``["429", "drop", "empty"]`` before a success.
    sequence: tuple[str, ...] = ()

    def __post_init__(self):
        unknown = (set(self.rates) | set(self.sequence)) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {', '.join(FAULTS)}")
        bad = {k: v for k, v in self.rates.items() if not 0.0 <= v <= 1.0}
        if bad:
            raise ValueError(f"fault rate(s) {bad} outside [0, 1]")
        for name in ("latency_s", "fault_latency_s", "hang_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} = {getattr(self, name)} is negative")
        if sum(self.rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"fault rates sum to {sum(self.rates.values()):.2f} > 1")

    def draw(self, key: str, attempt: int) -> str | None:
        """The fault for this attempt of this request (None: answer normally)."""
        if attempt < len(self.sequence):
            return self.sequence[attempt]
        h = hashlib.sha256(f"{self.seed}:{key}:{attempt}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2**64
        acc = 0.0
        for name in FAULTS:
            acc += self.rates.get(name, 0.0)
            if u < acc:
                return name
        return None


@dataclass
class Rule:
    reply: str | None = None
    match: str | None = None
    regex: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def matches(self, text: str) -> bool:
        if self.match is not None and self.match not in text:
            return False
        return not (self.regex is not None and not re.search(self.regex, text))


def load_script(path: str | Path) -> list[Rule]:
    """Rules from a JSON list or a JSONL file; errors name the file and line."""
    p = Path(path)
    raw = p.read_text(encoding="utf-8")
    try:
        items = json.loads(raw) if raw.lstrip().startswith("[") else None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}:{e.lineno}: invalid JSON: {e.msg}") from None
    if items is None:
        items = []
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{p}:{n}: invalid JSON: {e.msg}") from None
    rules = []
    for n, it in enumerate(items, 1):
        extra = set(it) - {"reply", "match", "regex", "tool_calls"}
        if extra:
            raise ValueError(f"{p}: rule {n}: unknown field(s) {sorted(extra)}")
        rules.append(Rule(**it))
    return rules
