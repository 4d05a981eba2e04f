"""Scoring stage: run a suite's probes over every stored event and write the metrics table.

Scoring never replays and never calls the summarizer: it reads ``corpus/`` and
``events/<arm>.jsonl`` and writes ``metrics.parquet`` and the exams' per-question grades,
``questions.parquet`` (:mod:`evalkit.contracts.questions`). Each session is parsed once and scored
for all arms together (kept messages are shared across arms, so their text views are computed
once); sessions are scored in a process pool. The main process only indexes the files (session
id → byte offsets), so memory stays at one session's events per worker; each worker sends its
session's rows back as an Arrow table, which is what the main process holds until the write.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.common.files import Span, index_jsonl, read_span
from evalkit.common.progress import log, track
from evalkit.common.workers import worker_pool
from evalkit.contracts import questions as question_table
from evalkit.contracts.config import ModelConfig
from evalkit.contracts.event import Event, events_path
from evalkit.contracts.metrics import SESSION_LEVEL, MetricRow, rows_to_arrow
from evalkit.contracts.metrics_stream import ArmSpill, replace_rows
from evalkit.contracts.records import RunConfig
from evalkit.contracts.runs import RunPaths, read_record
from evalkit.contracts.session import session_from_dict
from evalkit.corpus import QUESTIONS
from evalkit.facts import compute_facts, facts_from_dict
from evalkit.score.asked import about as asked_about
from evalkit.score.base import PROBES, ProbeInput, SessionView
from evalkit.score.suite import Suite, all_probes_suite, load_suite


@dataclass
class ScoreContext:
    """Run-level settings the probes may read (the judge needs the model and the run folder)."""

    run_dir: str = ""
    model: ModelConfig = field(default_factory=ModelConfig)
    banks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # probe-bank questions by session


@dataclass
class ScoreStats:
    rows: int = 0
    questions: int = 0  # rows of questions.parquet
    events: int = 0
    sessions: int = 0
    skipped: list[str] = field(default_factory=list)


def score_events(
    view: SessionView,
    events_by_arm: dict[str, list[Event]],
    suite: Suite,
    ctx: ScoreContext | None = None,
    run_id: str = "",
) -> list[MetricRow]:
    """Score one session's events (all arms) with the suite's probes; returns metric rows."""
    ctx = ctx or ScoreContext()
    view.extras["ctx"] = ctx
    probes = [(n, PROBES.entry(n), params) for n, params in suite.probes]
    view.show_only(ev for evs in events_by_arm.values() for ev in evs)
    rows: list[MetricRow] = []
    for evs in events_by_arm.values():
        groups: dict[int, list[Event]] = {}
        for ev in evs:
            groups.setdefault(ev.replicate, []).append(ev)
        for rep_events in groups.values():
            rep_events.sort(key=lambda e: e.event)
            for k, ev in enumerate(rep_events):
                inp = ProbeInput(ev, view, rep_events[:k], rep_events[k + 1 :])
                for name, entry, params in probes:
                    rows.extend(_run_probe(name, entry, params, inp, run_id))
    return rows


def _run_probe(name, entry, params, inp: ProbeInput, run_id: str) -> Iterable[MetricRow]:
    ev = inp.event
    key = (run_id, ev.arm, ev.session)

    def row(metric, value, error, session_level):
        e, r = (SESSION_LEVEL, SESSION_LEVEL) if session_level else (ev.event, ev.round)
        if error is not None or value is None:
            return MetricRow.failed(*key, e, r, ev.replicate, metric, error or "no value")
        return MetricRow(*key, e, r, ev.replicate, metric, float(value))

    try:
        values = entry.obj(inp, **params)
    except Exception as exc:  # a scorer bug is an error row per metric, never a zero
        msg = f"{name}: {type(exc).__name__}: {exc}"
        return [row(m, None, msg, False) for m in entry.info.get("metrics", {name: ""})]
    failed_summary = entry.info.get("needs_summary") and ev.summary_error
    out = []
    for v in values:
        if failed_summary and not v.session_level:
            out.append(row(v.metric, None, f"summary failed: {ev.summary_error}", False))
        else:
            out.append(row(v.metric, v.value, v.error, v.session_level))
    return out


def _score_job(job: tuple) -> tuple[pa.Table, list[str], int, dict | None, list, dict[str, str]]:
    """Worker: parse one session and its events, score them.

    Returns the rows (:func:`~evalkit.contracts.metrics.rows_to_arrow`), skipped records, the event count,
    newly built questions, judge rationales and what each asked question was about
    (:mod:`evalkit.score.asked`)."""
    corpus, sloc, facts_loc, ev_locs, suite, ctx, run_id, questions = job
    skipped: list[str] = []
    try:
        session = session_from_dict(json.loads(read_span(corpus, sloc)))
    except Exception as e:
        return (
            rows_to_arrow([]),
            [f"{corpus}:{sloc[2]}: {type(e).__name__}: {e} (its events skipped)"],
            0,
            None,
            [],
            {},
        )
    facts = facts_from_dict(json.loads(read_span(*facts_loc))) if facts_loc else compute_facts(session)
    view = SessionView(session, facts)
    wants_questions, pinned = questions
    if wants_questions:  # pinned None: not pinned yet, the judge probe builds them
        view.extras["questions"] = json.loads(read_span(*pinned))["questions"] if pinned else None
    events: dict[str, list[Event]] = {}
    n = 0
    for arm, path, locs in ev_locs:
        for span in locs:
            try:
                ev = Event.from_dict(json.loads(read_span(path, span)))
            except Exception as e:
                skipped.append(f"{path}:{span[2]}: {type(e).__name__}: {e}")
                continue
            events.setdefault(arm, []).append(ev)
            n += 1
    rows = rows_to_arrow([r.as_tuple() for r in score_events(view, events, suite, ctx, run_id)])
    names = question_table.split(rows)[1].column("metric").unique().to_pylist()
    about = asked_about(view, (tuple(n.split("_q:", 1)) for n in names))
    return rows, skipped, n, view.extras.get("new_questions"), view.extras.get("judgements", []), about


def resolve_suite(suite: Suite | str | os.PathLike | None, probe_names: list[str] | None) -> Suite:
    if isinstance(suite, Suite):
        return suite
    if suite is not None:
        return load_suite(suite)
    if probe_names:
        return Suite("selected", [(n, {}) for n in probe_names])
    return all_probes_suite()


def score_run(
    run_dir: str | os.PathLike,
    arms: list[str] | None = None,
    probe_names: list[str] | None = None,
    run_id: str = "",
    suite: Suite | str | os.PathLike | None = None,
    workers: int = 0,
    stats: ScoreStats | None = None,
) -> int:
    """Score ``events/<arm>.jsonl`` for each arm (default: every events file) into ``metrics.parquet``.

    ``suite`` is a :class:`Suite` or a suite file (default: ``probe_names``, else every probe).
    Returns the row count; ``stats`` (if given) receives events, sessions and skipped records.
    """
    from evalkit.score import judge  # noqa: F401  (registers the judge probes)

    run = Path(run_dir)
    the_suite = resolve_suite(suite, probe_names)
    stats = stats if stats is not None else ScoreStats()
    if arms is None:
        arms = sorted(p.stem for p in (run / "events").glob("*.jsonl"))
    from evalkit.score.banks import run_banks

    ctx = ScoreContext(str(run), _model_section(run), run_banks(run))
    corpus = run / "corpus" / "sessions.jsonl"
    sessions = index_jsonl(corpus, "id")
    ev_index = {a: index_jsonl(events_path(run, a), "session") for a in arms}
    for a, idx in ev_index.items():
        for sid in idx.keys() - sessions.keys():
            stats.skipped.append(
                f"events/{a}.jsonl: session {sid!r} is not in the corpus ({len(idx[sid])} events)"
            )
    # Facts and pinned questions go to the workers as line spans: loaded here, they took ~0.7 MB
    # a session of the driver's memory (15 MB of facts and 17 MB of questions JSON at 150 sessions).
    facts_path = run / "corpus" / "facts.jsonl"
    facts = _last_spans(facts_path)
    wants_questions = any(PROBES.entry(n).info.get("questions") for n in the_suite.names())
    q_path = run / "corpus" / QUESTIONS
    questions = _last_spans(q_path) if wants_questions else None
    jobs = []
    # In id order, so each arm's rows reach the spill below already in the file's order.
    for sid, locs in sorted(sessions.items()):
        ev_locs = [(a, str(events_path(run, a)), ev_index[a].get(sid, [])) for a in arms]
        if not any(loc for _, _, loc in ev_locs):
            continue
        q_loc = (str(q_path), questions[sid]) if questions and sid in questions else None
        f_loc = (str(facts_path), facts[sid]) if sid in facts else None
        jobs.append(
            (str(corpus), locs[0], f_loc, ev_locs, the_suite, ctx, run_id, (questions is not None, q_loc))
        )
    rows = ArmSpill(run / "metrics.spill")  # on disk as they come: the stage holds one session's rows
    asked = ArmSpill(run / "questions.spill")  # the exams' per-question grades, for questions.parquet
    new_questions = _Spill(q_path.with_name(QUESTIONS + ".new"))  # session → its line, spilled to disk
    judgements = _Spill(run / "judgements.jsonl.tmp")
    abouts = _Spill(run / "questions-about.jsonl.tmp")  # session → what its questions asked about
    # With a real model too: each worker's client shares the run's call cache (an identical call in
    # flight in another process is waited for, not sent twice) and its spending ledger, as the
    # replay's workers do.
    n_workers = workers or os.cpu_count() or 1
    pool = worker_pool(n_workers) if n_workers > 1 and len(jobs) > 1 else None
    try:
        results = pool.map(_score_job, jobs, chunksize=1) if pool else map(_score_job, jobs)
        for r, skipped, n_ev, nq, judged, about in track(results, "score", total=len(jobs), unit="sessions"):
            metric_rows, question_rows = question_table.split(r)
            rows.add(metric_rows)
            asked.add(question_rows)
            if about:
                abouts.add(question_rows.column("session")[0].as_py(), about)
            stats.skipped.extend(skipped)
            stats.events += n_ev
            stats.sessions += 1
            if nq is not None:
                new_questions.add(nq["session"], {"session": nq["session"], "questions": nq["questions"]})
            for j in judged:
                judgements.add("", j)
    finally:
        if pool:
            pool.shutdown()
        new_questions.close()
        judgements.close()
        abouts.close()
    if new_questions.spans and questions is not None:
        _save_questions(q_path, questions, new_questions)
    new_questions.path.unlink(missing_ok=True)
    if judgements.spans:
        os.replace(judgements.path, run / "judgements.jsonl")
    judgements.path.unlink(missing_ok=True)
    for s in stats.skipped:
        log(f"score: skipped {s}")
    # Continuation rows share the table; re-scoring replaces probe rows only.
    from evalkit.continuation.metrics import is_continuation_metric

    replace_rows(RunPaths(run).metrics, rows.tables(), lambda m: not is_continuation_metric(m))
    rows.remove()
    about_of = _about_reader(abouts)
    stats.questions = question_table.write(
        question_table.path_of(run),
        (question_table.from_metric_rows(t, about_of) for t in asked.tables()),
    )
    asked.remove()
    abouts.path.unlink(missing_ok=True)
    stats.rows = rows.num_rows
    return rows.num_rows


def _model_section(run: Path) -> ModelConfig:
    rc = read_record(run, RunConfig)
    return ModelConfig.model_validate(rc.config.get("model", {})) if rc is not None else ModelConfig()


def _last_spans(path: Path) -> dict[str, Span]:
    """Session → the span of its last line in a JSONL file keyed by ``session`` (a later line wins)."""
    return {sid: spans[-1] for sid, spans in index_jsonl(path, "session").items()} if path.exists() else {}


def _about_reader(spill: _Spill):
    """(session, question) → what the question asked about, read back from ``spill`` a session at
    a time (the last session read is kept: question rows come an arm's sessions in order)."""
    last: dict[str, Any] = {"session": None, "about": {}}

    def about_of(session: str, question: str) -> str | None:
        if session != last["session"]:
            spans = spill.spans.get(session)
            last["session"], last["about"] = (
                session,
                json.loads(read_span(spill.path, spans[-1])) if spans else {},
            )
        return last["about"].get(question)

    return about_of


class _Spill:
    """JSON lines written to a file as they come, each keyed by a session: the stage keeps spans, not records."""

    def __init__(self, path: Path):
        self.path = path
        self.spans: dict[str, list[Span]] = {}
        self._fh = open(path, "wb")  # noqa: SIM115  (closed by close(), in the stage's finally)
        self._n = 0

    def add(self, key: str, record: dict) -> None:
        line = (json.dumps(record, ensure_ascii=True) + "\n").encode()
        self._n += 1
        self.spans.setdefault(key, []).append((self._fh.tell(), len(line), self._n))
        self._fh.write(line)

    def close(self) -> None:
        self._fh.close()


def _save_questions(p: Path, pinned: dict[str, Span], new: _Spill) -> None:
    """Rewrite the questions file in session order: the pinned lines, a newly built one in place of its session's."""
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "wb") as fh:
        for sid in sorted(pinned.keys() | new.spans.keys()):
            if sid in new.spans:
                fh.write(read_span(new.path, new.spans[sid][-1]))
            else:
                d = json.loads(read_span(p, pinned[sid]))
                fh.write(
                    (
                        json.dumps({"session": sid, "questions": d["questions"]}, ensure_ascii=True) + "\n"
                    ).encode()
                )
    os.replace(tmp, p)
