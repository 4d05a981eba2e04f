"""The continuation stage: one continuation per stored compaction event, plus the observational baseline.

Reads ``corpus/`` and ``events/<arm>.jsonl``; writes into the run folder:

- ``continuation/metrics.parquet``: the continuation rows alone (metrics-table columns);
- ``metrics.parquet``: the same rows merged in (earlier continuation rows replaced), so the
  statistics stage reads one tidy table;
- ``continuation/log.jsonl``: per continuation, every call with how the environment answered it;
- ``continuation/manifest.json``: agent, whether it is a proxy, budget, counts and timing.

Sessions are independent, so a proxy agent runs on a process pool (``workers``, 0 = all cores);
an agent that calls a model runs in this process, through the one client the model layer gives.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from evalkit.common.files import Span, index_jsonl, read_span
from evalkit.common.progress import track
from evalkit.common.workers import worker_pool
from evalkit.continuation.agents import AGENTS, Agent, ContinuationInput, Transcript, is_proxy, make_agent
from evalkit.continuation.environment import ReplayEnvironment
from evalkit.continuation.metrics import continuation_metrics, is_continuation_metric, metric_names
from evalkit.continuation.observational import ARM as OBSERVED
from evalkit.continuation.observational import compaction_points, observed_metrics
from evalkit.continuation.recording import SessionRecord
from evalkit.contracts.config import ContinuationConfig, ModelConfig
from evalkit.contracts.event import Event, events_path
from evalkit.contracts.metrics import rows_to_arrow
from evalkit.contracts.metrics_stream import ArmSpill, replace_rows, write_sorted
from evalkit.contracts.records import ContinuationManifest
from evalkit.contracts.runs import RunPaths, write_record
from evalkit.contracts.session import Message, Session, session_from_dict

COUNTS = ("continuations", "errors", "calls", "unanswered", "observed_compactions")


def check_agent(section: ContinuationConfig) -> ContinuationConfig:
    """``section``, its agent known (an unknown agent fails before any work)."""
    AGENTS.entry(section.agent)
    return section


# --------------------------------------------------------------------------- reading events


def _event_index(run: Path, arms: list[str]) -> dict[str, tuple[str, dict[str, list[Span]]]]:
    """Per arm, its events file and the spans of its lines per session (read in the worker)."""
    out = {}
    for arm in arms:
        path = events_path(run, arm)
        if path.exists():
            out[arm] = (str(path), index_jsonl(path, "session"))
    return out


def _job_events(
    index: dict[str, tuple[str, dict[str, list[Span]]]], sid: str
) -> dict[str, tuple[str, list[Span]]]:
    return {arm: (path, spans[sid]) for arm, (path, spans) in index.items() if sid in spans}


def _parse_event(line: bytes) -> Event:
    return Event.from_dict(json.loads(line))


# --------------------------------------------------------------------------- one session


@dataclass
class SessionResult:
    rows: list[tuple] = field(default_factory=list)  # MetricRow fields
    log: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))


def _log_line(ev: Event, agent: str, t: Transcript) -> str:
    calls = []
    for s in t.steps:
        target = s.op.command or ",".join(s.op.reads + s.op.modifies)
        calls.append([s.call.name, s.op.kind, target, s.answer.source, s.answer.failed])
    record = {
        "arm": ev.arm,
        "session": ev.session,
        "event": ev.event,
        "at_message": ev.at_message,
        "agent": agent,
        "stopped": t.stopped,
        "error": t.error,
        "calls": calls,
    }
    return json.dumps(record, ensure_ascii=True)


def continue_session(
    session: Session, events: dict[str, tuple[str, list[Span]]], agent: Agent, name: str, n: int, run_id: str
) -> SessionResult:
    """Every continuation of one session (all arms: events file and line spans) and its observational rows."""
    out = SessionResult()
    points = compaction_points(session)
    if not events and not points:
        return out
    rec = SessionRecord.build(session)
    by_id = {m.id: m for m in session.messages}
    texts: dict[str, str] = {}  # every arm keeps mostly the same recorded messages: render each once
    masked: dict[str, Message] = {}  # and masks the same ones (observation masking)
    for arm, (path, spans) in events.items():
        for ev in (_parse_event(read_span(path, sp)) for sp in spans):
            inp = ContinuationInput.from_event(ev, rec, by_id, n, texts, masked)
            # A failed compaction that removed nothing left no compacted context to continue from:
            # its rows are errors, not values. (One that removed messages without a summary is
            # the candidate's behaviour, seed 003's, and is continued.)
            if ev.summary_error and not ev.removed_ids:
                transcript = Transcript(error=f"summary failed: {ev.summary_error}")
            else:
                try:
                    transcript = agent(inp, ReplayEnvironment(rec, ev.at_message))
                except Exception as e:  # an agent bug is an error row for this event, never a zero
                    transcript = Transcript(error=f"{type(e).__name__}: {e}")
            c = out.counts
            c["continuations"] += 1
            c["errors"] += transcript.error is not None
            c["calls"] += len(transcript.steps)
            c["unanswered"] += sum(not st.answer.answered for st in transcript.steps)
            out.log.append(_log_line(ev, name, transcript))
            for metric, value, error in continuation_metrics(rec, ev.at_message, transcript, n):
                out.rows.append(
                    (run_id, arm, session.id, ev.event, ev.round, ev.replicate, metric, value, error)
                )
    for k, metric, value in observed_metrics(session, n, rec) if points else ():
        out.counts["observed_compactions"] += metric == "calls_used"
        out.rows.append((run_id, OBSERVED, session.id, k, k + 1, 0, metric, value, None))
    return out


_WORKER_AGENTS: dict[str, Agent] = {}


def _load_session(corpus: str, span: Span) -> Session:
    return session_from_dict(json.loads(read_span(corpus, span)))


def _continue_in_worker(args: tuple) -> SessionResult:
    corpus, span, events, name, settings, model, run_dir, n, run_id = args
    if name not in _WORKER_AGENTS:
        _WORKER_AGENTS[name] = make_agent(name, settings, model, run_dir)
    return continue_session(_load_session(corpus, span), events, _WORKER_AGENTS[name], name, n, run_id)


# --------------------------------------------------------------------------- the stage


def run_continuation(
    run_dir: str | os.PathLike,
    arms: list[str],
    section: ContinuationConfig | None = None,
    model: ModelConfig | None = None,
    run_id: str = "",
    client=None,
) -> dict:
    """Run the configured agent from every event of every arm; returns the manifest it writes.

    ``client`` replaces the model client (``client(ChatRequest) -> ChatResponse``), as in tests.
    """
    run = Path(run_dir)
    settings = check_agent(section or ContinuationConfig())
    n, name = settings.max_calls, settings.agent
    # The agent's model: [model] with [continuation.model] on top.
    model = (model or ModelConfig()).with_overrides(settings.model)
    t0 = time.perf_counter()
    events = _event_index(run, arms)
    corpus = str(run / "corpus" / "sessions.jsonl")
    # In id order, so each arm's rows reach the spill below already in the metrics file's order.
    sessions = sorted((sid, spans[0]) for sid, spans in index_jsonl(corpus, "id").items())
    workers = settings.workers or os.cpu_count() or 1
    # A model agent too: each worker builds its own client on the run's call cache and spending
    # ledger (as the replay's workers do), so sessions continue side by side, not one at a time.
    parallel = client is None and workers > 1
    if parallel:
        pool = worker_pool(workers)
        jobs = (
            (corpus, span, _job_events(events, sid), name, settings, model, run, n, run_id) for sid, span in sessions
        )
        results = pool.map(_continue_in_worker, jobs, chunksize=2)
    else:
        pool = None
        agent = make_agent(name, settings, model, run, client)
        results = (
            continue_session(_load_session(corpus, span), _job_events(events, sid), agent, name, n, run_id)
            for sid, span in sessions
        )
    out_dir = run / "continuation"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = ArmSpill(out_dir / "metrics.spill")  # on disk as they come: one session's rows held
    counts = dict.fromkeys(COUNTS, 0)
    try:
        with open(out_dir / "log.jsonl.tmp", "w", encoding="utf-8") as log:
            for res in track(results, "continuation", total=None, unit="sessions"):
                rows.add(rows_to_arrow(res.rows))
                log.writelines(x + "\n" for x in res.log)
                for k, v in res.counts.items():
                    counts[k] += v
    finally:
        if pool is not None:
            pool.shutdown()
    os.replace(out_dir / "log.jsonl.tmp", out_dir / "log.jsonl")
    write_sorted(RunPaths(run).continuation_metrics, [rows.tables()])
    merge_into_metrics(RunPaths(run).metrics, rows.tables())
    rows.remove()
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
        "rows": rows.num_rows,
        "workers": workers if parallel else 1,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    write_record(run, ContinuationManifest, manifest)
    return manifest


def merge_into_metrics(path: Path, rows: pa.Table | Iterable[pa.Table]) -> None:
    """Replace earlier continuation rows of ``metrics.parquet`` with ``rows`` (a table, or a stream
    in canonical order); the file is created if absent."""
    replace_rows(path, rows, is_continuation_metric)


__all__ = ["check_agent", "continue_session", "merge_into_metrics", "run_continuation"]
