"""The reference compactor (the baseline arm) as a pipeline of small named steps.

Modelled on REFERENCES.md §1.A (with seed 003's summary-source budget as an option):

    cut → source (what the summarizer sees) → render → prompt → call → post-process
        → splice → carry

A :class:`Policy` names one function (or value) per step; the baseline is ``Policy()`` and a
candidate (``evalkit.replay.candidates``) is a small function that replaces a few steps. The
steps share one working record, :class:`~evalkit.replay.job.Pass`, so each stays a few lines
long. The reference steps live one module per step: ``cut``, ``source``, ``prompt``, ``splice``
(with the carry); the records they share in ``job``; this module ties them into the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evalkit.models import ChatRequest, ChatResponse
from evalkit.replay.cut import cut_keep_recent, split_head
from evalkit.replay.job import Job, Outcome, Pass
from evalkit.replay.prompt import (
    GUIDANCE,
    PREFIX_SYSTEM,
    TEMPLATE,
    PromptBuilder,
    build_prompt,
    instructions_of,
    previous_in_full,
)
from evalkit.replay.source import fill_source, stub_if_room
from evalkit.replay.splice import first_and_latest_three, splice_and_carry, splice_default


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


def compact(job: Job, policy: Policy) -> Outcome | None:
    """Run one arm's compaction: its whole-compactor override, or the step pipeline."""
    return (policy.compact or run_pipeline)(job, policy)
