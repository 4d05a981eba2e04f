"""Spending limits: ``[model] max_calls`` and ``max_cost_usd``, shared by every process of a run.

A budget is per invocation of ``evalkit run`` (what this command may spend): a run stopped by
its budget keeps every answered call in the call cache, and ``evalkit run --resume`` continues
with a fresh budget, paying only for calls not yet answered. The ledger is a small SQLite file in
the run folder (``budget.sqlite``), so the replay's worker processes draw on one budget.

Before a call is sent the client *reserves* it: one call, and its worst-case cost (every input
token uncached, ``max_tokens`` of output). A reservation that would cross either limit is refused
and :class:`BudgetExceeded` is raised, so the run stops *before* crossing. After the answer, the
reservation is settled to the actual cost.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from evalkit.contracts.config import ModelConfig
from evalkit.models.prices import Price, price_of
from evalkit.models.request import ChatRequest

LEDGER = "budget.sqlite"
DEFAULT_MAX_OUTPUT = 4096  # a request without max_tokens is reserved at this many output tokens
SCHEMA = """
CREATE TABLE IF NOT EXISTS invocations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    pid INTEGER NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0
);
"""


class StopRun(BaseException):
    """Stops a run before its end, keeping what is done (the run is then incomplete). A
    BaseException, like KeyboardInterrupt: the stages turn an ordinary exception into an error
    row, but a stop is not an error of the call it interrupts."""

    reason = "stopped"


class BudgetExceeded(StopRun):
    """The next call would cross the budget."""

    reason = "budget"


@dataclass(frozen=True)
class Spent:
    calls: int
    cost_usd: float


def limits(settings: ModelConfig) -> tuple[int | None, float | None]:
    """``(max_calls, max_cost_usd)`` from a ``[model]`` table; None where unset (0 is unset too)."""
    return settings.max_calls or None, settings.max_cost_usd or None


class Budget:
    """The limits and the ledger they are drawn from."""

    def __init__(
        self, path: str | os.PathLike, max_calls: int | None, max_cost: float | None, price: Price | None
    ):
        self.path = Path(path)
        self.max_calls, self.max_cost, self.price = max_calls, max_cost, price
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._conn() as c:
            c.executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        c.execute("PRAGMA busy_timeout=30000")
        return c

    def start(self) -> int:
        """A new invocation: later reservations draw on a fresh budget."""
        with self._conn() as c:
            return c.execute(
                "INSERT INTO invocations (started_at, pid) VALUES (?, ?)", (time.time(), os.getpid())
            ).lastrowid

    def _current(self, c: sqlite3.Connection) -> int:
        row = c.execute("SELECT MAX(id) FROM invocations").fetchone()
        return row[0] if row and row[0] is not None else self.start()

    def worst_case(self, request: ChatRequest) -> float:
        if self.price is None:
            return 0.0
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        return self.price.cost(math.ceil(chars / 4), request.max_tokens or DEFAULT_MAX_OUTPUT)

    def reserve(self, request: ChatRequest) -> float:
        """Reserve one call at its worst-case cost; raises :class:`BudgetExceeded` if it does not fit."""
        est = self.worst_case(request)
        c = self._conn()
        try:
            inv = self._current(c)
            cur = c.execute(
                "UPDATE invocations SET calls = calls + 1, cost_usd = cost_usd + ? WHERE id = ?"
                " AND (? IS NULL OR calls + 1 <= ?) AND (? IS NULL OR cost_usd + ? <= ?)",
                (est, inv, self.max_calls, self.max_calls, self.max_cost, est, self.max_cost),
            )
            if cur.rowcount == 1:
                return est
            spent = self._spent(c, inv)
        finally:
            c.close()
        raise BudgetExceeded(
            f"budget reached: {spent.calls} calls and ${spent.cost_usd:.4f} spent in this invocation"
            f" (max_calls {self.max_calls or '-'}, max_cost_usd {self.max_cost if self.max_cost is not None else '-'});"
            f" the next {request.purpose} call would cross it"
        )

    def settle(self, reserved: float, actual: float | None) -> None:
        """Replace a reservation's worst-case cost by the call's actual cost (if known)."""
        if actual is None or self.price is None:
            return
        try:
            c = self._conn()
            try:
                c.execute(
                    "UPDATE invocations SET cost_usd = MAX(0, cost_usd - ? + ?) WHERE id = ?",
                    (reserved, actual, self._current(c)),
                )
            finally:
                c.close()
        except sqlite3.OperationalError as e:  # a full disk; sqlite's message names no file
            from evalkit.models.backends import StoreFailed

            raise StoreFailed(f"{self.path}: cannot settle a paid call's cost ({e})") from None

    def _spent(self, c: sqlite3.Connection, inv: int) -> Spent:
        calls, cost = c.execute("SELECT calls, cost_usd FROM invocations WHERE id = ?", (inv,)).fetchone()
        return Spent(int(calls), float(cost))

    def spent(self) -> Spent:
        """What the current invocation has spent (reservations in flight included)."""
        c = self._conn()
        try:
            return self._spent(c, self._current(c))
        finally:
            c.close()


def budget_for(settings: ModelConfig, run_dir=None) -> Budget | None:
    """The budget of a ``[model]`` table, or None when it sets no limit. The ledger lives in the run
    folder (else next to the call cache); ``max_cost_usd`` needs the model's price."""
    max_calls, max_cost = limits(settings)
    if max_calls is None and max_cost is None:
        return None
    model = settings.model
    price = price_of(settings.prices, model)
    if max_cost is not None and price is None:
        raise ValueError(f"[model] max_cost_usd is set but [model.prices] has no entry for model {model!r}")
    if run_dir is not None:
        folder = Path(run_dir)
    elif settings.cache_path:
        folder = Path(settings.cache_path).parent
    else:
        raise ValueError("[model] max_calls / max_cost_usd need a run folder to keep the ledger in")
    return Budget(folder / LEDGER, max_calls, max_cost, price)
