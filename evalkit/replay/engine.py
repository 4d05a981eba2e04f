"""Walk a session forward through a context window, compacting where the harness would.

For each (session, arm): append the recorded messages one by one; at a turn boundary (the next
message is the assistant's, so a request would be sent) check the trigger; if it fires, hand
the context to the arm's compactor and continue from what it returns. Every compaction is an
:class:`~evalkit.events.Event`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from evalkit.events import Event, Invariants, context_entry, events_path
from evalkit.models import make_client
from evalkit.progress import track
from evalkit.replay.compactor import ARMS, CompactionInput
from evalkit.replay.settings import ReplaySettings
from evalkit.session import Message, Session, message_chars, tool_pairs_valid
from evalkit.tokens import message_tokens


def _should_fire(settings: ReplaySettings, tokens: int, n_messages: int) -> bool:
    if settings.trigger == "messages":
        return n_messages > settings.max_messages
    return tokens > settings.threshold


def replay_session(
    session: Session, arm: str, settings: ReplaySettings, model: dict, client=None
) -> list[Event]:
    """All compaction events of one session under one arm."""
    compactor = ARMS.get(arm)
    backend = client or make_client(model)
    context: list[Message] = []
    tokens = 0
    events: list[Event] = []
    recorded = {m.id for m in session.messages}
    msgs = session.messages
    for i, msg in enumerate(msgs):
        context.append(msg)
        tokens += message_tokens(msg, settings.tokenizer)
        at_boundary = i + 1 < len(msgs) and msgs[i + 1].role == "assistant"
        if not at_boundary or not _should_fire(settings, tokens, len(context)):
            continue
        rnd = len(events) + 1
        result = compactor(
            CompactionInput(
                context, rnd, settings, backend, model.get("model", ""), int(model.get("replicate", 0))
            )
        )
        if result is None:
            continue
        new_tokens = sum(message_tokens(m, settings.tokenizer) for m in result.new_context)
        removed_recorded = [m for m in result.removed if m.id in recorded]
        kept_ids = {m.id for m in result.new_context}
        kept_first = next((m.id for m in result.new_context if m.id in recorded and m.role != "system"), None)
        events.append(
            Event(
                arm=arm,
                session=session.id,
                event=len(events),
                round=rnd,
                trigger=settings.trigger,
                at_message=i,
                tokens_before=tokens,
                tokens_after=new_tokens,
                window=settings.window,
                first_kept_id=kept_first,
                removed_ids=[m.id for m in removed_recorded],
                summary=result.summary,
                summary_error=result.summary_error,
                request_key=result.request.key(model.get("backend", "")) if result.request else None,
                request=result.request.to_dict() if result.request else None,
                carried=result.carried,
                new_context=[context_entry(m, m.id in recorded) for m in result.new_context],
                invariants=Invariants(
                    tool_pairs_valid=tool_pairs_valid(result.new_context),
                    # Skeleton compactor renders every removed message, so nothing leaves unseen.
                    lost_chars=sum(
                        message_chars(m)
                        for m in removed_recorded
                        if m.id not in kept_ids and result.request is None
                    ),
                    over_limit=new_tokens > settings.window,
                ),
                backend=model.get("backend", ""),
                model=model.get("model", ""),
            )
        )
        context = list(result.new_context)
        tokens = new_tokens
    return events


def _replay_all_arms(args: tuple[str, list[str], dict, dict]) -> list[list[str]]:
    line, arms, settings, model = args
    import json

    from evalkit.session import session_from_dict

    session = session_from_dict(json.loads(line))
    rs = ReplaySettings.from_section(settings)
    return [[e.to_json() for e in replay_session(session, arm, rs, model)] for arm in arms]


def _session_lines(corpus_dir: Path) -> Iterator[str]:
    with open(corpus_dir / "sessions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield line


def replay_corpus(
    corpus_dir: str | os.PathLike,
    run_dir: str | os.PathLike,
    replay: dict,
    model: dict,
    n_sessions: int | None = None,
) -> dict[str, int]:
    """Replay every session under every arm; writes ``events/<arm>.jsonl``. Returns events per arm."""
    arms = list(replay.get("arms", ["baseline"]))
    for a in arms:
        ARMS.entry(a)  # fail before any work on an unknown arm
    workers = int(replay.get("workers") or 0) or os.cpu_count() or 1
    out = {a: events_path(run_dir, a) for a in arms}
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    # One open file per arm for the whole replay; closed in the finally below.
    fhs = {a: open(str(p) + ".tmp", "w", encoding="utf-8") for a, p in out.items()}  # noqa: SIM115
    counts = dict.fromkeys(arms, 0)
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            jobs = ((line, arms, replay, model) for line in _session_lines(Path(corpus_dir)))
            for per_arm in track(
                pool.map(_replay_all_arms, jobs, chunksize=2), "replay", total=n_sessions, unit="sessions"
            ):
                for a, lines in zip(arms, per_arm, strict=True):
                    for ln in lines:
                        fhs[a].write(ln + "\n")
                    counts[a] += len(lines)
    finally:
        for fh in fhs.values():
            fh.close()
    for p in out.values():
        os.replace(str(p) + ".tmp", p)
    return counts
