"""The plan as a text table (``evalkit plan``) and as ``plan.json`` in the run folder."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from evalkit.contracts.config import Experiment
from evalkit.contracts.runs import RunPaths
from evalkit.pipeline.plan.estimate import STAGES, Line, Plan, build_plan, offline_backend


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _usd(x: float | None) -> str:
    return "unpriced" if x is None else f"${x:,.2f}"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _hms(s: float) -> str:
    if math.isnan(s):
        return "batch window"
    h, rest = divmod(int(s), 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"


HEAD = (
    "arm",
    "stage",
    "requests",
    "shared",
    "in cache",
    "input tok",
    "shared pfx",
    "cached pfx",
    "output tok",
    "rounds",
    "cost",
)


def _row(ln: Line) -> tuple[str, ...]:
    return (
        ln.arm,
        ln.stage,
        _n(ln.requests),
        _n(ln.shared_calls),
        _n(ln.in_cache),
        _n(ln.input_tokens),
        _share(ln.shared_prefix_tokens, ln.input_tokens),
        _share(ln.cached_prefix_tokens, ln.input_tokens),
        _n(ln.output_tokens),
        str(ln.rounds) if ln.stage == "summarizer" else "",
        _usd(ln.cost_usd),
    )


def _sampling_line(plan: Plan) -> str:
    """How far the scaled-up totals may be from the corpus's, by sampling alone."""
    sm = plan.sampling or {}
    if sm.get("sampled", 0) >= sm.get("sessions", 0):
        return f"sampling error: none (every one of the {plan.sessions} sessions dry-replayed)"
    if sm.get("requests_se") is None:
        return (
            f"sampling error: unknown (1 of {plan.sessions} sessions dry-replayed; "
            "--sample 8 or more gives one)"
        )
    cost = sm.get("cost_usd_se")
    dollars = f", ± {_usd(cost)}" if cost and plan.totals().cost_usd is not None else ""
    return (
        f"sampling error: ± {_n(sm['requests_se'])} requests{dollars} (one standard error from "
        f"{sm['sampled']} of {sm['sessions']} sessions drawn at random; --sample {sm['sessions']} "
        "removes it)"
    )


def _lengths_line(plan: Plan) -> list[str]:
    """The dollars' uncertainty from estimated answer lengths (their own sample's error)."""
    se = (plan.sampling or {}).get("output_cost_se")
    if not se or plan.totals().cost_usd is None:
        return []
    return [f"answer-length error: ± {_usd(se)} (one standard error of the measured output lengths)"]


def render_plan(plan: Plan) -> str:
    """The plan table: one row per arm and stage, then totals, wall time and the assumptions."""
    rows = [_row(ln) for ln in sorted(plan.lines, key=lambda x: (STAGES.index(x.stage), x.arm))]
    rows += [_row(plan.totals(s)) for s in STAGES if plan._has(s)]
    rows.append(_row(plan.totals()))
    widths = [max(len(r[i]) for r in [HEAD, *rows]) for i in range(len(HEAD))]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    a = plan.assumptions
    out = [
        f"plan: experiment {plan.experiment}, backend {plan.backend}, model {plan.model}, "
        f"{plan.sessions} sessions ({plan.sampled} dry-replayed)",
        "",
        fmt.format(*HEAD),
    ]
    out += [fmt.format(*r) for r in rows]
    tot = plan.totals()
    out += [
        "",
        f"to send: {_n(tot.requests - tot.in_cache)} requests ({_n(tot.in_cache)} already in the call cache, "
        f"{_n(tot.shared_calls)} equal to another arm's and answered once); "
        f"{_n(tot.input_tokens)} input tokens, {_share(tot.shared_prefix_tokens, tot.input_tokens)} a prefix "
        f"another request shares, {_share(tot.cached_prefix_tokens, tot.input_tokens)} a prefix an earlier "
        f"request sent (provider cache hits if the cache lives that long)",
        f"cost: {_usd(tot.cost_usd)}" + (" (batch prices)" if a["batch"] else ""),
        _sampling_line(plan),
        *_lengths_line(plan),
        "wall time at "
        + f"{a['latency_s']:g} s per call: "
        + ", ".join(f"{s} {_hms(t)}" for s, t in plan.wall_s.items())
        + f" (summarizer: {min(a['replay_workers'], a['concurrency'])} at once = replay workers, "
        "a session's rounds being sequential; judge: an event's answers at once, then its grades, "
        f"event after event in each of {a['score_workers']} scoring processes; "
        f"agent: one call at a time in each of {a['agent_workers']} processes)",
        "",
        *(f"note: {n}" for n in plan.notes),
    ]
    return "\n".join(out)


def write_plan(plan: Plan, path: Path) -> Path:
    """``plan.json``, stamped with when it was made (and by which ``evalkit run``, when a run made
    it): the report compares it with the calls sent from then on, not with older ones."""
    import os
    import time

    from evalkit.contracts.records import Plan as PlanRecord
    from evalkit.contracts.runs import save_record
    from evalkit.models.usage import INVOCATION_ENV

    body = {**plan.to_dict(), "created_at": time.time(), "invocation": os.environ.get(INVOCATION_ENV, "")}
    save_record(path, PlanRecord, json.loads(json.dumps(body, default=str)))
    return path


def plan_before_run(exp: Experiment, run_dir: str | os.PathLike) -> Path | None:
    """Write ``plan.json`` into the run folder before a run with a real model, unless one is there
    (``evalkit plan`` writes it with the researcher's assumptions); the report compares it with the
    actual calls. None when the backend is the offline stand-in (nothing to pay)."""
    path = RunPaths(run_dir).plan
    if path.exists() or offline_backend(exp.config.model):
        return None
    return write_plan(build_plan(exp, run_dir), path)
