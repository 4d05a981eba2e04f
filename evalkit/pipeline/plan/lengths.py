"""How long the model's answers will be, for the plan's dollars: output tokens are most of a
run's cost, and max_tokens (an upper bound) overstated it by a quarter on the default experiment
and fourfold on real sessions.

Per call kind (``summarize``, ``answer``, ``judge``) the length comes from, in order:

1. the user (``evalkit plan --summary-tokens/--answer-tokens/--grade-tokens``);
2. the call cache, when it holds answers of the same model and endpoint of that kind;
3. a pilot: a few real calls of that kind, sent as the plan meets them, only requests the run
   will send exactly as they are (none built on a stand-in summary or answer). They are stored
   in the run's call cache under the keys the run uses, so the run does not pay for them again;
4. else max_tokens, an upper bound.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from evalkit.models.backends import EndpointUnusable, StoreFailed
from evalkit.models.request import ChatRequest, ChatResponse

KINDS = {"summarize": "summaries", "answer": "judge answers", "judge": "judge grades"}
PILOT_CALLS = 4  # sessions per kind: a few cents, and a standard error to state
PILOT_MAX = 3  # calls per kind at most PILOT_MAX * PILOT_CALLS


@dataclass
class OutputLengths:
    """Expected answer length per call kind, and where it came from."""

    upper: dict[str, float]  # max_tokens per kind
    given: dict[str, float | None] = field(default_factory=dict)
    cached: dict[str, list[int]] = field(default_factory=dict)  # measured in the call cache
    piloted: dict[str, list[int]] = field(default_factory=dict)  # measured by the pilot
    pilot_calls: int = 0  # per kind (0: no pilot)
    pilot_cost_usd: float = 0.0
    pilot_error: str | None = None
    client: Any = None  # the pilot's client (the run's call cache, no budget ledger), made lazily
    make_client: Any = None
    _chains: list = field(default_factory=list)  # (kind, session, arm) piloted

    def samples(self, kind: str) -> list[int]:
        return [*self.cached.get(kind, ()), *self.piloted.get(kind, ())]

    def expected(self, kind: str) -> float:
        if self.given.get(kind) is not None:
            return float(self.given[kind])
        got = self.samples(kind)
        # An answer never exceeds its max_tokens, whatever a cached row of a longer setting says.
        return min(statistics.fmean(got), self.upper[kind]) if got else self.upper[kind]

    def standard_error(self, kind: str) -> float:
        """One standard error of the mean length (0 when given; the whole range when unknown)."""
        if self.given.get(kind) is not None:
            return 0.0
        got = self.samples(kind)
        if len(got) >= 2:
            return statistics.stdev(got) / math.sqrt(len(got))
        return 0.0 if got else float("nan")

    def source(self, kind: str) -> str:
        if self.given.get(kind) is not None:
            return "as given"
        c, p = len(self.cached.get(kind, ())), len(self.piloted.get(kind, ()))
        if c and p:
            return f"measured on {c} cached answers and a pilot of {p} calls"
        if c:
            return f"measured on {c} cached answers"
        if p:
            return f"pilot of {p} calls"
        return "upper bound: max_tokens"

    def describe(self, kind: str) -> str:
        n, se = self.expected(kind), self.standard_error(kind)
        spread = f" ± {se:.0f}" if se == se and self.source(kind) not in ("as given",) and se > 0 else ""
        return f"{KINDS[kind]} {n:.0f}{spread} tokens ({self.source(kind)})"

    def wants_pilot(self, kind: str, session: str, arm: str) -> bool:
        """Whether to pilot this exact request: every call of one arm in up to ``pilot_calls``
        sessions (a session's later summaries, and the judge's calls on them, are exact only
        when its earlier summaries are real), at most :data:`PILOT_MAX` calls of a kind."""
        if not self.pilot_calls or self.pilot_error or self.given.get(kind) is not None:
            return False
        if len(self.cached.get(kind, ())) >= self.pilot_calls:
            return False
        if len(self.piloted.get(kind, ())) >= PILOT_MAX * self.pilot_calls:
            return False
        chains = [c for c in self._chains if c[0] == kind]
        if (kind, session, arm) in chains:
            return True
        # Lengths vary more across sessions than within one: a new session, on the same arm.
        if len(chains) < self.pilot_calls and all(c[2] == arm for c in chains):
            self._chains.append((kind, session, arm))
            return True
        return False

    def pilot(self, request: ChatRequest) -> ChatResponse | None:
        """Send ``request`` for real (stored in the run's call cache); its answer, or None when
        the pilot failed (then it stops, and the plan says why)."""
        kind = request.purpose
        try:
            if self.client is None:
                self.client = self.make_client()
            resp = self.client(request)
        except (Exception, EndpointUnusable, StoreFailed) as e:
            self.pilot_error = " ".join(str(e).split())[:300]
            return None
        if not resp.ok:
            self.pilot_error = " ".join(str(resp.error or "no answer").split())[:300]
            return None
        self.pilot_cost_usd += resp.cost_usd or 0.0
        tokens = resp.usage.get("completion_tokens")
        self.piloted.setdefault(kind, []).append(int(tokens) if tokens else max(1, len(resp.text or "") // 4))
        return resp

    def pilot_sent(self) -> int:
        return sum(len(v) for v in self.piloted.values())

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
