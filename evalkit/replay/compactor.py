"""The reference compactor (the baseline arm) as a pipeline of small named steps.

Modelled on REFERENCES.md §1.A (with seed 003's summary-source budget as an option):

    cut → source (what the summarizer sees) → render → prompt → call → post-process
        → splice → carry

A :class:`Policy` names one function (or value) per step; the baseline is ``Policy()`` and a
candidate (``evalkit.replay.candidates``) is a small function that replaces a few steps. The
steps share one working record, :class:`Pass`, so each stays a few lines long.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.models import Backend, ChatRequest, ChatResponse
from evalkit.replay.render import STUB_MARKER, RenderCache, Rendered, stub
from evalkit.replay.settings import ReplaySettings
from evalkit.session import Message, Text, message_chars
from evalkit.templates import REFERENCE_TEMPLATE

TEMPLATE = REFERENCE_TEMPLATE
GUIDANCE = "Number the Next Steps. Be specific: keep file paths, commands, test results and error messages."
SPLICE_PREFIX = "[Earlier conversation compacted to save context]\n\nCompacted from {n} tokens\n\n"
FIRST_PROMPT = "Summarize the conversation above."
UPDATE_PROMPT = "Update the summary with the new activity; preserve all existing information."

# Meta keys on the messages the compactor makes (none of them is a recorded message).
SUMMARY_META = "evalkit_summary"  # the summary text alone, what the next summarizer sees
USERS_META = "evalkit_users"  # user texts carried verbatim
UNSEEN_META = "evalkit_users_unseen"  # per carried text: chars of it no summarizer saw in full
FILES_META = "evalkit_files"  # {"read": [...], "modified": [...]} carried deterministically
CARRY_FILES_META = "evalkit_carry_files"  # plugin-carry texts by file name (seed 002)
MIN_STUB = len(STUB_MARKER) + 16  # seed 003: a stub "succeeds" once its wrapper and marker fit


def system_prompt(template: tuple[str, ...], guidance: str, extra: tuple[str, ...] = ()) -> str:
    """The summarizer's instructions: the section template, guidance, then any candidate lines."""
    lines = [
        "You are compacting a coding agent's conversation so it can continue with less context. "
        "Write a structured summary with exactly these sections, in this order:",
        "",
        "\n".join(template),
        "",
        guidance,
        *extra,
    ]
    return "\n".join(lines)


# The baseline's instructions, as sent (other modules and tests quote it).
SYSTEM_PROMPT = system_prompt(TEMPLATE, GUIDANCE)
# request_layout = "prefix": one system message for every arm; each arm's instructions follow
# the conversation in the user message (docs/models.md, "Prefix-cache-aware requests").
PREFIX_SYSTEM = (
    "You are compacting a coding agent's conversation so it can continue with less context. "
    "The conversation comes first; your instructions follow it."
)


def instructions_of(policy: Policy) -> str:
    """An arm's summarizer instructions: the system message, or with the prefix layout the
    ``<instructions>`` block after the conversation."""
    return system_prompt(policy.template, policy.guidance, policy.instructions)


def is_made(msg: Message) -> bool:
    """A message a compactor made (summary or carry), as opposed to a recorded one."""
    return any(k in msg.meta for k in (SUMMARY_META, USERS_META))


@dataclass
class Job:
    """One compaction request from the engine: the context and what the compactor may use."""

    context: list[Message]
    round: int
    settings: ReplaySettings
    client: Backend
    model: str
    replicate: int = 0
    backend_name: str = ""
    session_id: str = ""
    session_meta: dict[str, Any] = field(default_factory=dict)
    renders: RenderCache = field(default_factory=RenderCache)
    tokens: Callable[[Message], int] = lambda m: -(-message_chars(m) // 4)
    memo: dict[str, ChatResponse] = field(default_factory=dict)  # equal requests are one call
    order: dict[str, int] = field(default_factory=dict)  # session index of each recorded message
    state: dict[str, Any] = field(default_factory=dict)  # per (session, arm), kept across rounds


@dataclass
class Outcome:
    """What a compactor returns. ``accounting`` maps each message that left the view to
    (characters shown verbatim to a summarizer or carried, characters elided by policy)."""

    new_context: list[Message]
    summary: str = ""
    summary_error: str | None = None
    request: ChatRequest | None = None
    recipe: list[Any] | None = None  # the user prompt as parts (see evalkit.replay.requests)
    carried: list[str] = field(default_factory=list)
    accounting: dict[str, tuple[int, int]] = field(default_factory=dict)
    source_chars: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    deferred_lost: int = 0  # unseen chars of carried texts that left the carry in this compaction
    request_key: str | None = None


@dataclass
class Pass:
    """The working record the steps of one compaction read and fill."""

    job: Job
    policy: Policy
    cut: int = 0
    system: list[Message] = field(default_factory=list)
    previous: Message | None = None  # the earlier compaction's summary message, leaving the view
    leaving_made: list[Message] = field(default_factory=list)  # earlier summary/carry messages
    activity: list[Message] = field(default_factory=list)  # recorded head, oldest first
    taken: list[tuple[Message, Rendered, int | None]] = field(
        default_factory=list
    )  # (msg, render, stub room)
    tail: list[Message] = field(default_factory=list)
    source_chars: int = 0
    summary: str = ""
    carried: list[str] = field(default_factory=list)
    plugin_texts: dict[str, str] = field(default_factory=dict)

    @property
    def leaving(self) -> list[Message]:
        """Messages leaving the view, in model order (what a carry hook receives)."""
        return [*self.leaving_made, *(m for m, _, _ in self.taken)]


# --------------------------------------------------------------------------- steps: cut


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


# --------------------------------------------------------------------------- steps: source


def stub_if_room(size: int, room: int) -> bool:
    """Seed 003's original rule: stub a never-fit message whenever wrapper and marker fit."""
    return room >= MIN_STUB


def stub_if_empty(size: int, room: int) -> bool:
    """Seed 003's fix: stub a never-fit message only when the source is still empty."""
    return size == 0


def fill_source(p: Pass) -> None:
    """Render the head oldest first into the summary source, up to its budget.

    A message that does not fit the rest of the budget but would fit a fresh source stays in
    the context for the next pass (prefer-keep). One that can never fit is stubbed or left,
    as ``policy.stub_rule`` says; what a stub cuts is loss, not policy.
    """
    budget, variant = p.job.settings.summary_source_chars, p.policy.renderer
    size, stop, acts = 0, len(p.activity), p.activity
    for k, m in enumerate(acts):
        r = p.job.renders.get(m, variant)
        sep = 2 if p.taken else 0
        if not budget or size + sep + len(r.text) <= budget:
            p.taken.append((m, r, None))
            size += sep + len(r.text)
            continue
        room = budget - size - sep
        if len(r.text) > budget and p.policy.stub_rule(size, room):
            room = budget if size == 0 else room
            p.taken.append((m, stub(r, room), room))
            size += sep + min(room, len(r.text))
            stop = k + 1
            # A stubbed call takes its results along, so the cut cannot orphan them.
            while stop < len(acts) and acts[stop].tool_results():
                p.taken.append((acts[stop], stub(p.job.renders.get(acts[stop], variant), 0), 0))
                stop += 1
        else:
            stop = k
            # Never cut between a call and its result: leave the whole exchange for the next pass.
            while 0 < stop < len(acts) and acts[stop].tool_results():
                stop -= 1
                p.taken.pop()
        break
    p.tail = acts[stop:] + p.job.context[p.cut :]
    p.source_chars = size


# --------------------------------------------------------------------------- steps: prompt


def previous_in_full(p: Pass) -> str | None:
    """The earlier summary, as the incremental update hands it back to the summarizer."""
    return p.previous.meta[SUMMARY_META] if p.previous is not None else None


class PromptBuilder:
    """Builds the user prompt as text and, in step, as compact parts: literals and spans of
    rendered recorded messages, so events store the exact request without copying it
    (``evalkit.replay.requests`` rebuilds it)."""

    def __init__(self, order: dict[str, int]) -> None:
        self.order = order  # session index of each recorded message
        self.chunks: list[str] = []
        self.parts: list[Any] = []

    def lit(self, s: str) -> None:
        self.chunks.append(s)
        if self.parts and isinstance(self.parts[-1], str):
            self.parts[-1] += s
        else:
            self.parts.append(s)

    def messages(self, items: list[tuple[Message, Rendered, int | None]], variant: str) -> None:
        """Renders joined by blank lines; consecutive session messages become one span."""
        for j, (m, r, room) in enumerate(items):
            last = self.parts[-1] if self.parts else None
            at = self.order.get(m.id)
            if (
                j
                and room is None
                and isinstance(last, dict)
                and "span" in last
                and last["as"] == variant
                and at is not None
                and at == self.order[last["span"][1]] + 1
            ):
                self.chunks.append("\n\n" + r.text)
                last["span"][1] = m.id
                continue
            if j:
                self.lit("\n\n")
            if at is None:  # not a recorded message: its render is stored as a literal
                self.lit(r.text)
                continue
            self.chunks.append(r.text)
            if room is not None:
                self.parts.append({"stub": m.id, "as": variant, "room": room})
            else:
                self.parts.append({"span": [m.id, m.id], "as": variant})

    def text(self) -> str:
        return "".join(self.chunks)


def build_prompt(p: Pass) -> PromptBuilder:
    """``<conversation>`` (or ``<previous-summary>`` + ``<new-activity>``), then, for the
    ``retained`` candidate, the kept tail in ``<retained>``, then the instruction. With
    ``request_layout = "prefix"``: ``<new-activity>`` before ``<previous-summary>``, and the arm's
    instructions in ``<instructions>`` before the closing instruction."""
    b, pol = PromptBuilder(p.job.order), p.policy
    prefix = p.job.settings.request_layout == "prefix"
    prev = pol.previous(p)
    if prev is not None and not prefix:
        b.lit(f"<previous-summary>\n{prev}\n</previous-summary>\n<new-activity>\n")
    else:
        b.lit("<new-activity>\n" if prev is not None else "<conversation>\n")
    b.messages(p.taken, pol.renderer)
    b.lit("\n</new-activity>\n\n" if prev is not None else "\n</conversation>\n\n")
    if prev is not None and prefix:
        # The new activity is often the same for every arm (the cut is measured from the end);
        # each arm's earlier summary is its own, so it follows.
        b.lit(f"<previous-summary>\n{prev}\n</previous-summary>\n\n")
    if pol.retained:
        kept = [(m, p.job.renders.get(m, pol.renderer), None) for m in p.tail if not is_made(m)]
        b.lit("<retained>\n")
        b.messages(kept, pol.renderer)
        b.lit(
            "\n</retained>\n\nThe <retained> messages stay in context verbatim after the summary: do not "
            "summarize them, but write Progress and Next Steps as the state after them.\n"
        )
    if prefix:
        b.lit(f"<instructions>\n{instructions_of(pol)}\n</instructions>\n\n")
    b.lit(UPDATE_PROMPT if prev is not None else FIRST_PROMPT)
    return b


# --------------------------------------------------------------------------- steps: splice and carry


def splice_default(p: Pass, summary: str, tokens_before: int) -> tuple[str, dict]:
    """The reference splice: a banner naming the tokens compacted, then the summary."""
    return SPLICE_PREFIX.format(n=tokens_before) + summary, {}


def first_and_latest_three(previous: list[str], new: list[str]) -> list[str]:
    """The reference user carry: the session's first user message and its latest three."""
    users = previous + new
    return users[:1] + users[1:][-3:]


def carry_files(p: Pass) -> dict[str, list[str]]:
    """Deterministic carry of files read and modified (paths only), accumulated across rounds."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for m in p.leaving_made:
        for k, v in m.meta.get(FILES_META, {}).items():
            (read if k == "read" else modified).update(dict.fromkeys(v))
    for m, _, _ in p.taken:
        r, w = p.job.renders.files(m)
        read.update(dict.fromkeys(r))
        modified.update(dict.fromkeys(w))
    return {"read": [f for f in read if f not in modified], "modified": list(modified)}


def files_block(files: dict[str, list[str]]) -> str:
    out = []
    for tag, key in (("read-files", "read"), ("modified-files", "modified")):
        if files[key]:
            out.append(f"<{tag}>\n" + "\n".join(files[key]) + f"\n</{tag}>")
    return "\n\n".join(out)


# --------------------------------------------------------------------------- the policy


@dataclass(frozen=True)
class Policy:
    """One arm's choice for each step. ``Policy()`` is the baseline."""

    name: str = "baseline"
    replicate_offset: int = 0  # aa: the baseline again under another replicate index
    cut: Callable[[Job], int | None] = cut_keep_recent
    source: Callable[[Pass], None] = fill_source
    stub_rule: Callable[[int, int], bool] = stub_if_room
    renderer: str = "default"
    previous: Callable[[Pass], str | None] = previous_in_full
    template: tuple[str, ...] = TEMPLATE
    guidance: str = GUIDANCE
    instructions: tuple[str, ...] = ()
    retained: bool = False
    prompt: Callable[[Pass], PromptBuilder] = build_prompt
    gate: Callable[[Pass], bool] = lambda p: True  # False: skip this compaction
    postprocess: tuple[Callable[[Pass, str], str], ...] = ()
    splice: Callable[[Pass, str, int], tuple[str, dict]] = splice_default
    carry_users: Callable[[list[str], list[str]], list[str]] = first_and_latest_three
    carry_hook: Callable[[Pass], list[str]] | None = None
    accept: Callable[[Pass, Outcome], Outcome] = lambda p, o: o
    compact: Callable[[Job, Policy], Outcome | None] | None = None  # replaces the whole pipeline


def call_summarizer(job: Job, request: ChatRequest, key: str) -> ChatResponse:
    """Through the model client; equal requests within a session are one call."""
    resp = job.memo.get(key)
    if resp is None:
        resp = job.memo[key] = job.client(request)
    return resp


def check_prefix_layout(backend: str) -> None:
    """The offline stand-in reads each arm's sections from the system message, which the prefix
    layout leaves generic: it would silently summarize every arm with its default template."""
    from evalkit.models import is_offline_standin

    try:
        offline = is_offline_standin(backend)
    except KeyError:
        return  # a plugin's backend: a real model
    if offline:
        raise ValueError(
            f'replay.request_layout = "prefix" is for real endpoints; the offline stand-in {backend!r} '
            "reads each arm's template from the system message: use the reference layout"
        )


def run_pipeline(job: Job, policy: Policy) -> Outcome | None:
    """The reference compaction, step by step; None when there is nothing to compact."""
    cut = policy.cut(job)
    if cut is None:
        return None
    p = Pass(job, policy, cut)
    split_head(p)
    policy.source(p)
    # A head holding only the previous summary is still compacted (the summary re-summarized,
    # first-kept message unchanged): seed 004's redundant compaction, which skip-redundant skips.
    if (not p.taken and p.previous is None) or not policy.gate(p):
        return None
    if job.settings.request_layout == "prefix":
        check_prefix_layout(job.backend_name)
    prompt = policy.prompt(p)
    request = ChatRequest(
        model=job.model,
        messages=(
            {
                "role": "system",
                "content": PREFIX_SYSTEM
                if job.settings.request_layout == "prefix"
                else instructions_of(policy),
            },
            {"role": "user", "content": prompt.text()},
        ),
        max_tokens=job.settings.summary_max_tokens,
        replicate=job.replicate,
    )
    # The model client's key binds backend and endpoint, so the event names the cached call; a plain
    # callable (tests, plugins) has no cache, and the backend name alone keys it.
    key = job.client.key(request) if hasattr(job.client, "key") else request.key(job.backend_name)
    response = call_summarizer(job, request, key)
    error = response.error if not response.ok else None
    if error is None and not (response.text or "").strip():
        error = "empty summary"  # seed 003: an empty reply is not a summary
    if error is not None:
        return Outcome(
            list(job.context), "", error, request, prompt.parts, source_chars=p.source_chars, request_key=key
        )
    summary = response.text or ""
    for step in policy.postprocess:
        summary = step(p, summary)
    p.summary = summary
    outcome = splice_and_carry(p, request, prompt)
    outcome.request_key = key
    return policy.accept(p, outcome)


def splice_and_carry(p: Pass, request: ChatRequest, prompt: PromptBuilder) -> Outcome:
    """The new context: system, the summary message (plugin carry first), the user carry, the tail."""
    job, pol = p.job, p.policy
    tokens_before = sum(job.tokens(m) for m in job.context)
    files = carry_files(p)
    banner, provenance = pol.splice(p, p.summary, tokens_before)
    plugin = pol.carry_hook(p) if pol.carry_hook else []
    blocks = [Text(t) for t in plugin]
    text = banner + (("\n\n" + files_block(files)) if files["read"] or files["modified"] else "")
    blocks.append(Text(text))
    made = [
        Message(
            f"evalkit:r{job.round}:summary",
            "user",
            blocks,  # type: ignore[arg-type]
            {SUMMARY_META: p.summary, FILES_META: files, CARRY_FILES_META: p.plugin_texts, **provenance},
        )
    ]
    # Each carried text remembers how much of its message no summarizer saw in full (a seed-003
    # stub): that part is lost only when the text later drops out of the carry.
    prev = [
        (u, n)
        for m in p.leaving_made
        for u, n in zip(m.meta.get(USERS_META, []), m.meta.get(UNSEEN_META, []), strict=False)
    ]
    new = [(m.text, message_chars(m) - r.shown - r.elided) for m, r, _ in p.taken if m.is_genuine_user()]
    users = pol.carry_users([u for u, _ in prev], [u for u, _ in new])
    unseen = [next((n for t, n in [*prev, *new] if t.startswith(u)), 0) for u in users]
    deferred = sum(n for t, n in prev if not any(t.startswith(u) for u in users))
    if users:
        made.append(
            Message(
                f"evalkit:r{job.round}:users",
                "user",
                [Text("<user-requests>\n" + "\n\n".join(users) + "\n</user-requests>")],
                {USERS_META: users, UNSEEN_META: unseen},
            )
        )
    carried = [*plugin, *users]
    accounting = {m.id: (r.shown, r.elided) for m, r, _ in p.taken}
    carried_set = set(carried)
    for m, _, _ in p.taken if carried_set else ():
        # Carried verbatim is not lost, whatever the summarizer saw of it.
        if (m.is_genuine_user() and m.text in carried_set) or any(
            r.output in carried_set for r in m.tool_results()
        ):
            accounting[m.id] = (message_chars(m), 0)
    return Outcome(
        p.system + made + p.tail,
        p.summary,
        None,
        request,
        prompt.parts,
        carried,
        accounting,
        p.source_chars,
        {"provenance": provenance} if provenance else {},
        deferred_lost=deferred,
    )


def compact(job: Job, policy: Policy) -> Outcome | None:
    """Run one arm's compaction: its whole-compactor override, or the step pipeline."""
    return (policy.compact or run_pipeline)(job, policy)
