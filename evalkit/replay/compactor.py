"""The reference compactor (the baseline arm), modelled on REFERENCES.md §1.A.

Walking-skeleton version: cut, re-render, six-section template, incremental update, spliced
summary message, first + latest three user messages carried. The replay issue extends it
with the candidates from the seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from evalkit.models import Backend, ChatRequest
from evalkit.registry import Registry
from evalkit.replay.render import render_head
from evalkit.replay.settings import ReplaySettings
from evalkit.session import Message, Text
from evalkit.tokens import message_tokens

TEMPLATE = """## Goal
## Constraints & Preferences
## Progress
### Done
### In Progress
### Blocked
## Key Decisions
## Next Steps
## Critical Context"""

SYSTEM_PROMPT = (
    "You are compacting a coding agent's conversation so it can continue with less context. "
    "Write a structured summary with exactly these sections, in this order:\n\n"
    + TEMPLATE
    + "\n\nNumber the Next Steps. Be specific: keep file paths, commands, test results and error messages."
)
SPLICE_PREFIX = "[Earlier conversation compacted to save context]\n\nCompacted from {n} tokens\n\n"
SUMMARY_META = "evalkit_summary"


@dataclass
class CompactionResult:
    """What a compactor returns: the new context and how it was made."""

    new_context: list[Message]
    removed: list[Message]
    summary: str
    summary_error: str | None
    request: ChatRequest | None
    carried: list[str] = field(default_factory=list)
    made_ids: set[str] = field(default_factory=set)  # ids of messages the compactor created


@dataclass
class CompactionInput:
    context: list[Message]
    round: int
    settings: ReplaySettings
    backend: Backend
    model: str
    replicate: int = 0


Compactor = Callable[[CompactionInput], CompactionResult | None]
ARMS: Registry[Compactor] = Registry("candidate")


def cut_index(context: list[Message], keep_recent: int, tokenizer: str = "chars4") -> int | None:
    """Where the kept tail starts: walk back until ``keep_recent`` tokens are covered, then
    snap forward to an assistant message so no tool call is split from its result."""
    if len(context) < 4:
        return None
    covered, i = 0, len(context)
    while i > 0 and covered < keep_recent:
        i -= 1
        covered += message_tokens(context[i], tokenizer)
    while i < len(context) and context[i].role != "assistant":
        i += 1
    first_body = next((k for k, m in enumerate(context) if m.role != "system"), 0)
    if i >= len(context) or i <= first_body:
        return None
    return i


def is_summary(msg: Message) -> bool:
    return bool(msg.meta.get(SUMMARY_META))


@ARMS.register(
    "baseline",
    "the reference compactor (REFERENCES.md §1.A): the default every candidate is compared to",
    evidence="-",
)
def baseline(inp: CompactionInput) -> CompactionResult | None:
    ctx = inp.context
    cut = cut_index(ctx, inp.settings.keep_recent, inp.settings.tokenizer)
    if cut is None:
        return None
    system = [m for m in ctx[:cut] if m.role == "system"]
    head = [m for m in ctx[:cut] if m.role != "system"]
    tail = ctx[cut:]
    previous = next((m for m in head if is_summary(m)), None)
    activity = [m for m in head if not is_summary(m) and not m.meta.get("evalkit_carry")]
    rendered = render_head(activity)
    if previous is not None:
        user = (
            f"<previous-summary>\n{previous.meta['evalkit_summary']}\n</previous-summary>\n"
            f"<new-activity>\n{rendered}\n</new-activity>\n\nUpdate the summary with the new activity; "
            "preserve all existing information."
        )
    else:
        user = f"<conversation>\n{rendered}\n</conversation>\n\nSummarize the conversation above."
    request = ChatRequest(
        model=inp.model,
        messages=({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}),
        max_tokens=inp.settings.summary_max_tokens,
        replicate=inp.replicate,
    )
    response = inp.backend(request)
    if not response.ok:
        return CompactionResult(list(ctx), [], "", response.error or "no text", request)
    summary = response.text or ""
    tokens_before = sum(message_tokens(m, inp.settings.tokenizer) for m in ctx)
    made: list[Message] = []
    sid = f"evalkit:r{inp.round}"
    made.append(
        Message(
            f"{sid}:summary",
            "user",
            [Text(SPLICE_PREFIX.format(n=tokens_before) + summary)],
            {SUMMARY_META: summary},
        )
    )
    # First and latest three genuine user messages ride along verbatim.
    users = [m for m in activity if m.is_genuine_user()]
    carried_users = users[:1] + [u for u in users[-3:] if u is not users[0]] if users else []
    carried = [u.text for u in carried_users]
    if carried:
        made.append(
            Message(
                f"{sid}:carry-users",
                "user",
                [Text("<user-requests>\n" + "\n\n".join(carried) + "\n</user-requests>")],
                {"evalkit_carry": "user"},
            )
        )
    removed = [m for m in head if m.id not in {x.id for x in made}]
    return CompactionResult(
        system + made + tail, removed, summary, None, request, carried, {m.id for m in made}
    )
