"""The continuation stage: one continuation per stored compaction event, plus the observational baseline.

Reads ``corpus/`` and ``events/<arm>.jsonl``; writes into the run folder:

- ``continuation/metrics.parquet``: the continuation rows alone (metrics-table columns);
- ``metrics.parquet``: the same rows merged in (earlier continuation rows replaced), so the
  statistics stage reads one tidy table;
- ``continuation/log.jsonl``: per continuation, every call with how the environment answered it;
- ``continuation/manifest.json``: agent, whether it is a proxy, budget, counts and timing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd

from evalkit.config import merge
from evalkit.continuation.agents import AGENTS, ContinuationInput, Transcript, is_proxy, make_agent
from evalkit.continuation.environment import ReplayEnvironment
from evalkit.continuation.metrics import continuation_metrics, is_continuation_metric, metric_names
from evalkit.continuation.observational import ARM as OBSERVED
from evalkit.continuation.observational import compaction_points, observed_metrics
from evalkit.continuation.recording import SessionRecord
from evalkit.corpus import write_json
from evalkit.events import Event, read_events
from evalkit.metrics import COLUMNS, MetricRow, normalize, read_metrics, to_frame, write_metrics
from evalkit.progress import track
from evalkit.session import session_from_dict

DEFAULTS = {"enabled": True, "agent": "heuristic", "max_calls": 30, "model": {}, "max_tokens": None}


def settings_from(section: dict | None) -> dict:
    """The ``[continuation]`` section with defaults, validated (errors name the key)."""
    s = {**DEFAULTS, **(section or {})}
    if not isinstance(s["max_calls"], int) or isinstance(s["max_calls"], bool) or s["max_calls"] < 1:
        raise ValueError(f"continuation.max_calls: expected a positive integer, got {s['max_calls']!r}")
    AGENTS.entry(s["agent"])  # an unknown agent fails before any work
    if not isinstance(s["model"], dict):
        raise ValueError("continuation.model: expected a table (overrides of [model])")
    return s


def _load_events(run: Path, arms: list[str]) -> dict[str, dict[str, list[Event]]]:
    by_session: dict[str, dict[str, list[Event]]] = {}
    for arm in arms:
        path = run / "events" / f"{arm}.jsonl"
        if not path.exists():
            continue
        for ev in read_events(path):
            ev.request = None  # the summarizer's input is large and continuation never reads it
            by_session.setdefault(ev.session, {}).setdefault(arm, []).append(ev)
    return by_session


def _log_line(ev: Event, agent: str, t: Transcript) -> str:
    calls = [
        [
            s.call.name,
            s.op.kind,
            s.op.command or ",".join(s.op.reads + s.op.modifies),
            s.answer.source,
            s.answer.failed,
        ]
        for s in t.steps
    ]
    return json.dumps(
        {
            "arm": ev.arm,
            "session": ev.session,
            "event": ev.event,
            "at_message": ev.at_message,
            "agent": agent,
            "stopped": t.stopped,
            "error": t.error,
            "calls": calls,
        },
        ensure_ascii=True,
    )


def run_continuation(
    run_dir: str | os.PathLike,
    arms: list[str],
    section: dict | None = None,
    model: dict | None = None,
    run_id: str = "",
    client=None,
) -> dict:
    """Run the configured agent from every event of every arm; returns the manifest it writes."""
    run = Path(run_dir)
    s = settings_from(section)
    n, name = s["max_calls"], s["agent"]
    agent = make_agent(name, {**s, "model": merge(model or {}, s["model"])}, run, client)
    t0 = time.perf_counter()
    events = _load_events(run, arms)
    rows: list[MetricRow] = []
    counts = {"continuations": 0, "errors": 0, "calls": 0, "unanswered": 0, "observed_compactions": 0}
    out_dir = run / "continuation"
    out_dir.mkdir(parents=True, exist_ok=True)
    log_tmp = out_dir / "log.jsonl.tmp"
    with open(run / "corpus" / "sessions.jsonl", encoding="utf-8") as fh, open(log_tmp, "w") as log:
        for line in track(fh, "continuation", total=len(events) or None, unit="sessions"):
            if not line.strip():
                continue
            session = session_from_dict(json.loads(line))
            per_arm = events.get(session.id, {})
            points = compaction_points(session)
            if not per_arm and not points:
                continue
            rec = SessionRecord.build(session)
            by_id = {m.id: m for m in session.messages}
            for arm, evs in per_arm.items():
                for ev in evs:
                    inp = ContinuationInput.from_event(ev, rec, by_id, n)
                    env = ReplayEnvironment(rec, ev.at_message)
                    try:
                        transcript = agent(inp, env)
                    except Exception as e:  # an agent bug is an error row for this event, never a zero
                        transcript = Transcript(error=f"{type(e).__name__}: {e}")
                    counts["continuations"] += 1
                    counts["errors"] += transcript.error is not None
                    counts["calls"] += len(transcript.steps)
                    counts["unanswered"] += sum(not st.answer.answered for st in transcript.steps)
                    log.write(_log_line(ev, name, transcript) + "\n")
                    for metric, value, error in continuation_metrics(rec, ev.at_message, transcript, n):
                        rows.append(
                            MetricRow(
                                run_id,
                                arm,
                                session.id,
                                ev.event,
                                ev.round,
                                ev.replicate,
                                metric,
                                value,
                                error,
                            )
                        )
            for k, metric, value in observed_metrics(session, n, rec) if points else ():
                counts["observed_compactions"] += metric == "calls_used"
                rows.append(MetricRow(run_id, OBSERVED, session.id, k, k + 1, 0, metric, value))
    os.replace(log_tmp, out_dir / "log.jsonl")
    table = to_frame(rows)
    write_metrics(table, out_dir / "metrics.parquet")
    merge_into_metrics(run / "metrics.parquet", table)
    entry = AGENTS.entry(name)
    manifest = {
        "agent": name,
        "proxy": is_proxy(name),
        "label": entry.info.get("label", name),
        "description": entry.description,
        "max_calls": n,
        "metrics": metric_names(n),
        "arms": arms,
        "observed_arm": OBSERVED,
        "counts": counts,
        "rows": len(table),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    write_json(out_dir / "manifest.json", manifest)
    return manifest


def merge_into_metrics(path: Path, table: pd.DataFrame) -> None:
    """Replace earlier continuation rows of ``metrics.parquet`` with ``table`` (the file is created if absent)."""
    if path.exists():
        old = read_metrics(path)
        keep = old[~old["metric"].map(is_continuation_metric).astype(bool)]
        table = pd.concat([normalize(keep[COLUMNS]), table], ignore_index=True)
    write_metrics(table, path)


__all__ = ["DEFAULTS", "merge_into_metrics", "run_continuation", "settings_from"]
