"""A run under a budget: start the invocation's ledger, and turn a budget stop into an
incomplete run that says how far it got (``incomplete.json``) instead of a crash."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evalkit.common.progress import log
from evalkit.contracts.records import Incomplete, Plan
from evalkit.contracts.runs import read_record, write_record
from evalkit.models.budget import StopRun, budget_for

MARKER = Incomplete.FILE
EXIT_INCOMPLETE = 3


class RunIncomplete(SystemExit):
    """The run stopped before its end (budget); exit status 3. The run folder keeps what was done."""

    def __init__(self, message: str):
        super().__init__(EXIT_INCOMPLETE)
        self.message = message

    def __str__(self) -> str:
        return self.message


def incomplete(run_dir: str | Path) -> dict | None:
    """The record of why a run is incomplete, or None if it is not."""
    rec = read_record(run_dir, Incomplete)
    return rec.model_dump(mode="json", exclude_unset=True) if rec else None


def _cached_calls(run_dir: Path) -> int | None:
    import sqlite3

    p = run_dir / "model-calls.sqlite"
    if not p.is_file():
        return None
    with sqlite3.connect(p) as c:
        return c.execute("SELECT COUNT(*) FROM calls").fetchone()[0]


def _answered_calls(run_dir: Path) -> int:
    """Calls the endpoint answered in every invocation into this folder, from the client's ledger
    (the cache does not keep everything answered: an unparseable judge verdict is dropped)."""
    from evalkit.models.usage import read_ledger

    return sum(1 for x in read_ledger(run_dir) if x.get("outcome") == "sent")


def _planned_calls(run_dir: Path) -> int | None:
    plan = read_record(run_dir, Plan)
    return None if plan is None else int(plan.totals["all"]["requests"])


@contextmanager
def spending(exp, paths) -> Iterator[None]:
    """Run the stages inside; a :class:`StopRun` (budget, batch stragglers) becomes
    ``incomplete.json`` and :class:`RunIncomplete`."""
    root = Path(paths.root)
    budget = budget_for(exp.config.model, root)
    if budget is not None:
        budget.start()
    try:
        yield
    except StopRun as e:
        spent = budget.spent() if budget else None
        cached, answered, planned = _cached_calls(root), _answered_calls(root), _planned_calls(root)
        record = {
            "reason": e.reason,
            "detail": str(e),
            "calls_this_invocation": spent.calls if spent else None,
            "cost_usd_this_invocation": round(spent.cost_usd, 6) if spent else None,
            "calls_answered": answered,
            "calls_answered_in_cache": cached,
            "calls_planned": planned,
            "at": time.time(),
            "resume": f"evalkit run --resume{' --config ' + exp.source if not exp.source.endswith(']') else ''}",
        }
        write_record(root, Incomplete, record)
        got = f"{answered} calls answered so far ({cached} kept in the cache)" + (
            f" of ~{planned} planned" if planned else ""
        )
        msg = f"{root}: stopped ({e.reason}: {e}); {got}. `{record['resume']}` continues"
        log(msg)
        raise RunIncomplete(msg) from None
    (root / MARKER).unlink(missing_ok=True)
