"""Walk a session forward through a context window, compacting where the harness would.

For each (session, arm): append the recorded messages one by one; at a turn boundary (the next
message is the assistant's, so a request would be sent) check the trigger; if it fires, hand
the context to the arm's compactor and continue from what it returns. Every compaction is an
:class:`~evalkit.contracts.event.Event`. All arms of one session run in one worker and share its caches
(token counts and renders of recorded messages, summarizer answers by request key), which is
what keeps replay of many arms cheap.
"""

from __future__ import annotations

import json
import math
import operator
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from evalkit.common.progress import log, track
from evalkit.common.tokens import get_counter, message_tokens
from evalkit.common.workers import bounded_map, worker_pool
from evalkit.contracts.config import ModelConfig, ReplayConfig
from evalkit.contracts.event import Event, Invariants, events_path
from evalkit.contracts.session import (
    Compaction,
    Message,
    Session,
    message_chars,
    message_to_dict,
    pair_ids,
    session_from_dict,
    tool_pairs_valid,
)
from evalkit.models import Backend, ChatResponse, make_client
from evalkit.models.transcript import clear_caches
from evalkit.replay.compactor import compact
from evalkit.replay.external import CompactorError
from evalkit.replay.job import (
    CARRY_FILES_META,
    FILES_META,
    SUMMARY_META,
    UNSEEN_META,
    USERS_META,
    Job,
    Outcome,
    is_made,
)
from evalkit.replay.render import RenderCache
from evalkit.replay.requests import request_record
from evalkit.replay.settings import ReplaySettings
from evalkit.replay.variants import check_arm, policy_for, settings_for


class SessionCache:
    """Per-session values every arm reuses: token and char counts of recorded messages (by id),
    their renders, and summarizer answers by request key (equal requests are one call)."""

    def __init__(self, session: Session, tokenizer: str):
        self.session = session
        self.tokenizer = tokenizer
        # Recorded compaction markers never enter a replayed context, so they take no index.
        self.is_compaction = [_is_recorded_compaction(m) for m in session.messages]
        kept = [m for m, c in zip(session.messages, self.is_compaction, strict=True) if not c]
        self.order = {m.id: i for i, m in enumerate(kept)}
        self.recorded = {m.id for m in session.messages}
        self.renders = RenderCache()
        self.memo: dict[str, ChatResponse] = {}
        # Per arm: recorded compactions (trigger "recorded") that left nothing to summarize.
        self.nothing_to_summarize: Counter[str] = Counter()
        self._tokens: dict[str, int] = {}
        self._chars: dict[str, int] = {}
        self._pairs: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    def tokens(self, m: Message) -> int:
        t = self._tokens.get(m.id)
        if t is None:
            t = message_tokens(m, self.tokenizer)
            # Summary and carry messages differ between arms under one id, so only recorded
            # messages (and their deterministic masked copies) are cached.
            if m.id in self.recorded or not is_made(m):
                self._tokens[m.id] = t
        return t

    def chars(self, m: Message) -> int:
        c = self._chars.get(m.id)
        if c is None:
            c = self._chars[m.id] = message_chars(m)
        return c

    def pair_ids(self, m: Message) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """:func:`~evalkit.contracts.session.pair_ids`, kept for recorded messages: every event
        checks the pairing of its whole new context, mostly the same recorded messages."""
        p = self._pairs.get(m.id)
        if p is None:
            p = pair_ids(m)
            if m.id in self.recorded:
                self._pairs[m.id] = p
        return p


def _is_recorded_compaction(msg: Message) -> bool:
    return any(isinstance(b, Compaction) for b in msg.blocks)


def replay_session(
    session: Session,
    arm: str,
    settings: ReplaySettings,
    model: ModelConfig,
    client: Backend | None = None,
    cache: SessionCache | None = None,
    replicate: int = 0,
) -> list[Event]:
    """All compaction events of one session under one arm (one replicate).

    Recorded compaction messages (the recording harness's own summaries) never enter the
    replayed context; with ``trigger = "recorded"`` they are where compaction fires.
    """
    policy = policy_for(arm, settings.variants)
    settings = settings_for(settings, arm, settings.variants)
    cache = cache or SessionCache(session, settings.tokenizer)
    backend = client or make_client(model)
    n_reps = model.replicates
    rep = replicate + policy.replicate_offset * n_reps
    counter = get_counter(settings.tokenizer)
    backend_name = model.backend
    state: dict = {}
    context: list[Message] = []
    tokens = 0
    events: list[Event] = []
    msgs = session.messages
    broken = False
    # A failed summarizer call is retried on a schedule, not at every turn: after the k-th failure
    # in a row, the next 2**k - 1 trigger points pass (a dead endpoint is asked O(log turns) times).
    failures, wait = 0, 0
    is_compaction = cache.is_compaction
    # trigger = "once": the index from which the single compaction fires (the session's end at 1.0)
    once_from = max(0, math.ceil(settings.once_at * len(msgs)) - 1)
    for i, msg in enumerate(msgs):
        if broken:
            break
        if is_compaction[i]:
            fire = settings.trigger == "recorded"
        else:
            context.append(msg)
            tokens += cache.tokens(msg)
            at_boundary = i + 1 < len(msgs) and msgs[i + 1].role == "assistant"
            if settings.trigger == "messages":
                fire = at_boundary and len(context) > settings.max_messages
            elif settings.trigger == "once":  # at a boundary, or at the session's last message
                fire = not events and i >= once_from and (at_boundary or i + 1 == len(msgs))
            else:
                fire = at_boundary and settings.trigger == "tokens" and tokens > settings.threshold
        if not fire:
            continue
        if wait:
            wait -= 1
            continue
        job = Job(
            context,
            len(events) + 1,
            settings,
            backend,
            model.model,
            rep,
            backend_name,
            session.id,
            session.meta,
            cache.renders,
            cache.tokens,
            cache.memo,
            cache.order,
            state,
            context_tokens=tokens,
        )
        try:
            outcome = compact(job, policy)
        except CompactorError as e:
            # A compactor that crashed or timed out would only do so again at every later turn:
            # record the error once and stop compacting this session under this arm.
            outcome = Outcome(list(context), summary_error=str(e), meta={"stopped": True})
            broken = True
        if outcome is None:
            if is_compaction[i]:
                cache.nothing_to_summarize[arm] += 1
            continue
        failed_call = cache.memo.get(outcome.request_key or "")
        if failed_call is not None and failed_call.error is not None:
            failures += 1
            wait = 2**failures - 1
        else:
            failures = 0
        event = _event(session, arm, settings, cache, context, tokens, i, job, outcome, counter)
        event.backend, event.model, event.replicate = backend_name, job.model, rep
        events.append(event)
        if event.removed_ids or outcome.summary_error is None:
            state["first_kept"] = event.first_kept_id
        context = list(outcome.new_context)
        tokens = event.tokens_after
    return events


_BULKY = (SUMMARY_META, USERS_META, UNSEEN_META, FILES_META, CARRY_FILES_META)


def _entry(m: Message, recorded: set[str]) -> dict:
    """A new-context entry: recorded messages (and their masked copies) by reference."""
    if m.id in recorded:
        return {"ref": m.id}
    if m.meta.get("evalkit_masked") in recorded:
        return {"ref": m.meta["evalkit_masked"], "mask": "outputs"}
    return _made_entry(m)


def _made_entry(m: Message) -> dict:
    """A message the compactor made, for the event: in full, but without the meta that only
    repeats its text (the summary is the event's ``summary``); ``evalkit_made`` names its kind."""
    kind = "summary" if SUMMARY_META in m.meta else "users" if USERS_META in m.meta else "other"
    slim = Message(
        m.id, m.role, m.blocks, {"evalkit_made": kind, **{k: v for k, v in m.meta.items() if k not in _BULKY}}
    )
    return {"message": message_to_dict(slim)}


def _event(session, arm, settings, cache, context, tokens, at, job, o: Outcome, counter) -> Event:
    recorded = cache.recorded
    if len(o.new_context) == len(context) and all(map(operator.is_, o.new_context, context)):
        removed = []  # the context kept whole (the uncompacted reference: ~3,000 messages an event)
    else:
        new_ids = {m.id for m in o.new_context}
        removed = [m for m in context if m.id not in new_ids and m.id in recorded]
    lost, truncated = o.deferred_lost, 0
    for m in removed:
        shown, elided = o.accounting.get(m.id, (0, 0))
        lost += max(0, cache.chars(m) - shown - elided)
        truncated += elided
    new_tokens = sum(cache.tokens(m) for m in o.new_context)
    first_kept = next(
        (m.id for m in o.new_context if m.id in cache.recorded and m.role != "system"),
        None,
    )
    return Event(
        arm=arm,
        session=session.id,
        event=job.round - 1,
        round=job.round,
        trigger=settings.trigger,
        at_message=at,
        tokens_before=tokens,
        tokens_after=new_tokens,
        window=settings.window,
        first_kept_id=first_kept,
        removed_ids=[m.id for m in removed],
        summary=o.summary,
        summary_error=o.summary_error,
        request_key=o.request_key or (o.request.key(job.backend_name) if o.request else None),
        request=request_record(o.request, o.recipe) if o.request else None,
        carried=o.carried,
        new_context=[_entry(m, recorded) for m in o.new_context],
        invariants=Invariants(
            tool_pairs_valid=tool_pairs_valid(o.new_context, cache.pair_ids),
            lost_chars=lost,
            over_limit=new_tokens > settings.window,
        ),
        meta=o.meta,
        truncated_chars=truncated,
        source_chars=o.source_chars,
        summary_tokens=counter(o.summary) if o.summary else 0,
    )


# --------------------------------------------------------------------------- corpus, in parallel

_CLIENTS: dict[str, Backend] = {}


def _worker_client(model: ModelConfig, run_dir: str | None) -> Backend:
    """One model client per worker process (it may hold a cache connection)."""
    key = json.dumps([model.model_dump(mode="json"), run_dir], sort_keys=True)
    if key not in _CLIENTS:
        _CLIENTS[key] = make_client(model, run_dir)
    return _CLIENTS[key]


def replay_session_arms(
    session: Session,
    arms: list[str],
    settings: ReplaySettings,
    model: ModelConfig,
    client: Backend,
    cache: SessionCache | None = None,
) -> list[list[Event]]:
    """Every arm (and replicate) of one session, sharing the session's caches."""
    cache = cache or SessionCache(session, settings.tokenizer)
    n_reps = model.replicates
    return [
        [e for r in range(n_reps) for e in replay_session(session, a, settings, model, client, cache, r)]
        for a in arms
    ]


def _replay_line(args: tuple[str, list[str], ReplayConfig, ModelConfig, str | None]) -> tuple[list[list[str]], dict]:
    line, arms, section, model, run_dir = args
    session = session_from_dict(json.loads(line))
    settings = ReplaySettings.from_section(section)
    cache = SessionCache(session, settings.tokenizer)
    per_arm = replay_session_arms(session, arms, settings, model, _worker_client(model, run_dir), cache)
    clear_caches()  # the summarizer's line caches pay within a session only (evalkit.models.transcript)
    return [[e.to_json() for e in evs] for evs in per_arm], dict(cache.nothing_to_summarize)


def _session_lines(corpus_dir: Path) -> Iterator[str]:
    with open(corpus_dir / "sessions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield line


def replay_corpus(
    corpus_dir: str | os.PathLike,
    run_dir: str | os.PathLike,
    replay: ReplayConfig,
    model: ModelConfig,
    n_sessions: int | None = None,
) -> dict[str, int]:
    """Replay every session under every arm; writes ``events/<arm>.jsonl``. Returns events per arm.

    Sessions are spread over worker processes (all arms of a session in one worker); results
    come back in corpus order, so the files are byte-identical run to run.
    """
    arms = list(replay.arms)
    settings = ReplaySettings.from_section(replay)  # a bad trigger fails here, before any work
    for a in arms:
        check_arm(a, settings.variants)  # fail before any work on an unknown arm
    workers = replay.workers or os.cpu_count() or 1
    out = {a: events_path(run_dir, a) for a in arms}
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    # One open file per arm for the whole replay; closed in the finally below.
    fhs = {a: open(str(p) + ".tmp", "w", encoding="utf-8") for a, p in out.items()}  # noqa: SIM115
    counts = dict.fromkeys(arms, 0)
    nothing: Counter[str] = Counter()  # recorded compactions that left nothing to summarize
    jobs = ((line, arms, replay, model, str(run_dir)) for line in _session_lines(Path(corpus_dir)))
    try:
        if workers == 1:
            results: Iterator = map(_replay_line, jobs)
            pool = None
        else:
            pool = worker_pool(workers)
            # Results are written in corpus order, so a slow session at the head of the window
            # stalls the pool once the window behind it is done: a looping session replays 4-10x
            # slower than a typical one (session 31 of the default corpus: 9.8 s against 1-2.5 s),
            # which a window of 2 per worker left one core idle for. The window bounds memory.
            results = bounded_map(pool, _replay_line, jobs, 6 * workers)
        try:
            for per_arm, skipped in track(results, "replay", total=n_sessions, unit="sessions"):
                nothing.update(skipped)
                for a, lines in zip(arms, per_arm, strict=True):
                    for ln in lines:
                        fhs[a].write(ln + "\n")
                    counts[a] += len(lines)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    finally:
        for fh in fhs.values():
            fh.close()
    for p in out.values():
        os.replace(str(p) + ".tmp", p)
    if nothing:
        # Counted and said, not silently dropped: these recorded compactions produced no event.
        (Path(run_dir) / "events" / "recorded_nothing_to_summarize.json").write_text(
            json.dumps(dict(sorted(nothing.items())), indent=1) + "\n", encoding="utf-8"
        )
        log(
            "replay: recorded compactions with nothing to summarize (not replayed): "
            + ", ".join(f"{a}={n}" for a, n in sorted(nothing.items()))
        )
    return counts
