"""The cut step: where the kept tail starts, and the head sorted into what stays, what an earlier
compaction made, and the recorded activity to summarize."""

from __future__ import annotations

from evalkit.contracts.session import Message
from evalkit.replay.job import SUMMARY_META, Job, Pass, is_made


def snap_to_assistant(context: list[Message], i: int) -> int | None:
    """Move a cut forward to an assistant message so no tool call is split from its result."""
    while i < len(context) and context[i].role != "assistant":
        i += 1
    first_body = next((k for k, m in enumerate(context) if m.role != "system"), 0)
    if i >= len(context) or i <= first_body:
        return None
    return i


def cut_keep_recent(job: Job) -> int | None:
    """Walk back until keep-recent tokens (or, for the messages trigger, kept messages) are
    covered, then snap forward to an assistant message; fewer than 4 messages: no compaction."""
    ctx = job.context
    if len(ctx) < 4:
        return None
    if job.settings.trigger == "messages":
        return snap_to_assistant(ctx, max(0, len(ctx) - job.settings.kept_messages))
    covered, i = 0, len(ctx)
    while i > 0 and covered < job.settings.keep_recent:
        i -= 1
        covered += job.tokens(ctx[i])
    return snap_to_assistant(ctx, i)


def split_head(p: Pass) -> None:
    """Sort the head into system messages (kept), earlier compaction output and recorded activity."""
    for m in p.job.context[: p.cut]:
        if m.role == "system":
            p.system.append(m)
        elif is_made(m):
            p.leaving_made.append(m)
            if SUMMARY_META in m.meta:
                p.previous = m
        else:
            p.activity.append(m)
