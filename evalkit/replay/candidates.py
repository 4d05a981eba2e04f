"""Every arm: the baseline, the A/A arm, and the candidates from the seeds, registered by name.

A candidate is a function ``Policy -> Policy`` that replaces a few steps of the reference
pipeline (``evalkit.replay.compactor``); ``+`` joins names and applies them left to right
(``head-tail+validate``). Each entry carries a one-line description and the evidence from
its seed text that it answers. Third-party candidates come in through the ``evalkit.candidate``
entry-point group (same signature) or as ``external:CMD`` (``evalkit.replay.external``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import reduce

from evalkit.common.registry import Registry
from evalkit.common.tokens import get_counter
from evalkit.contracts.event import mask_outputs
from evalkit.contracts.session import message_chars
from evalkit.replay.compactor import Policy
from evalkit.replay.cut import snap_to_assistant
from evalkit.replay.job import CARRY_FILES_META, SUMMARY_META, Outcome, Pass, is_made
from evalkit.replay.prompt import TEMPLATE
from evalkit.replay.source import stub_if_empty
from evalkit.replay.validator import repair

Candidate = Callable[[Policy], Policy]
ARMS: Registry[Candidate] = Registry("candidate")


def arm(name: str, description: str, evidence: str, seed: str, prompt_only: bool = False):
    """Register an arm; ``prompt_only`` marks a change to text only a model reads (an offline stand-in cannot judge it)."""
    return ARMS.register(name, description, evidence=evidence, seed=seed, prompt_only=prompt_only)


def policy_for(name: str) -> Policy:
    """The policy of a built-in arm: ``baseline``, a candidate, ``a+b`` compositions or
    ``external:CMD`` (variants defined by settings: :func:`evalkit.replay.variants.policy_for`)."""
    if name.startswith("external:"):
        from evalkit.replay.external import external_policy

        return external_policy(name[len("external:") :])
    parts = [p.strip() for p in name.split("+")]
    if not all(parts):
        raise ValueError(f"arm {name!r}: empty name in a '+' composition")
    transforms = [ARMS.get(p) for p in parts]
    return replace(reduce(lambda pol, t: t(pol), transforms, Policy()), name=name)


@arm(
    "baseline",
    "the reference compactor (REFERENCES.md §1.A; a summary-source budget when configured)",
    "-",
    "-",
)
def baseline(p: Policy) -> Policy:
    return p


@arm(
    "aa",
    "the baseline again under replicate index 1: the A/A arm that measures the noise floor",
    "results vary up to 14x across replicates at temperature 0 (REFERENCES.md §2): replicates are mandatory",
    "-",
)
def aa(p: Policy) -> Policy:
    return replace(p, replicate_offset=p.replicate_offset + 1)


# --------------------------------------------------------------------------- seed 000


@arm(
    "head-tail",
    "re-render keeps a long tool result's first 500 + last 1,500 chars and up to 30 tally/error lines from the middle",
    "66% of long test results had their pass/fail tally only after character 2,000",
    "000",
)
def head_tail(p: Policy) -> Policy:
    return replace(p, renderer="head-tail")


BRIDGE = (
    "Checkpoint of earlier work. Messages after it are newer and win where they differ. Work listed as "
    "Done is on disk: don't redo or re-verify it unless something newer contradicts it."
)


def splice_bridge(p: Pass, summary: str, tokens_before: int) -> tuple[str, dict]:
    """The bridge sentence replaces the token banner; the count moves to the provenance."""
    return BRIDGE + "\n\n" + summary, {"tokens_before": tokens_before}


@arm(
    "bridge",
    "the summary message opens with a sentence saying how the checkpoint relates to the newer messages",
    "nothing told the model how the checkpoint relates to the verbatim messages after it",
    "000",
    prompt_only=True,
)
def bridge(p: Policy) -> Policy:
    # The next summarizer reads meta["evalkit_summary"], which holds no bridge: it never stacks.
    return replace(p, splice=splice_bridge)


STATE_TEMPLATE = (
    *TEMPLATE[:6],
    "## Tests & Errors (latest)",
    "## Failed approaches / don't retry",
    "## Key Decisions",
    "## Next Step",
    "## Critical Context",
)


@arm(
    "state-sections",
    "adds Tests & Errors (latest) and Failed approaches sections; one Next Step that follows from the state",
    "only 55% of summaries mention a tally; 20% re-fail the same command within 30 calls; agents fail to stop",
    "000",
    prompt_only=True,
)
def state_sections(p: Policy) -> Policy:
    return replace(
        p,
        template=STATE_TEMPLATE,
        guidance=(
            "Write exactly one Next Step, and it must follow from the state above "
            '("Verify and finish" is allowed). Be specific: keep file paths, commands, test results and '
            "error messages."
        ),
    )


SHORT = (
    "Target about 700 words in all. Caps per section: Goal 2 sentences; Constraints & Preferences 8 "
    "bullets; each Progress subsection 6 bullets; Key Decisions 5 bullets; Next Steps 3 items; "
    "Critical Context 8 bullets."
)


@arm(
    "short",
    "a ~700-word target with per-section caps in the summarizer instructions",
    "median summary length grew 771 -> 2,167 words by round five; the evidence on length disagrees",
    "000",
    prompt_only=True,
)
def short(p: Policy) -> Policy:
    return replace(p, instructions=(*p.instructions, SHORT))


USER_CAP, USERS_CAP = 8_000, 32_000


def carry_all_users(previous: list[str], new: list[str]) -> list[str]:
    """Every user message (each <= 8,000 chars); over 32,000 in all, the first plus the most recent."""
    users = [u[:USER_CAP] for u in previous + new]
    if sum(map(len, users)) <= USERS_CAP:
        return users
    keep, total = [], len(users[0])
    for u in reversed(users[1:]):
        if total + len(u) > USERS_CAP:
            break
        keep.append(u)
        total += len(u)
    return [users[0], *reversed(keep)]


@arm(
    "carry-all",
    "every genuine user message rides <user-requests> (each <= 8,000 chars, <= 32,000 in all)",
    "summaries keep ~17% of user constraints against 93-99.7% when the user's words are re-appended verbatim",
    "000",
)
def carry_all(p: Policy) -> Policy:
    return replace(p, carry_users=carry_all_users)


def validate_summary(p: Pass, summary: str) -> str:
    """Deterministically append what the summary lacks (:mod:`evalkit.replay.validator`): the
    latest test outcome and its command (when the kept tail shows none), the user's lines, and a
    next step."""
    return repair(summary, [m for m, _, _ in p.taken], p.tail)


@arm(
    "validate",
    "after the summary: append the latest test outcome + command, the user's own lines and a next step if missing (own validator)",
    "a cheap deterministic version of judge-based summary repair (+2.6 to +8.8 points in the literature)",
    "000",
)
def validate(p: Policy) -> Policy:
    return replace(p, postprocess=(*p.postprocess, validate_summary))


# --------------------------------------------------------------------------- seed 002


def carry_plugin_files(p: Pass) -> list[str]:
    """The carry hook of seed 002's DocuMentor plugin: the latest contents of the session's
    carry files (``meta["carry_files"]``), from Read results or earlier carries leaving the view.

    Earlier compaction messages leaving the view are handed to the hook, so their carried texts
    ride on; one still in view is not, so nothing is carried twice.
    """
    names = list(p.job.session_meta.get("carry_files") or [])
    latest: dict[str, str] = {}
    calls: dict[str, str] = {}
    for m in p.leaving:
        if is_made(m):
            latest.update({k: v for k, v in m.meta.get(CARRY_FILES_META, {}).items() if k in names})
            continue
        for c in m.tool_calls():
            path = str(c.args.get("file_path") or c.args.get("path") or "")
            base = path.rsplit("/", 1)[-1]
            if base in names:
                calls[c.id] = base
        for r in m.tool_results():
            if r.call_id in calls and not r.is_error:
                latest[calls[r.call_id]] = r.output
    p.plugin_texts = {n: latest[n] for n in names if n in latest}
    return list(p.plugin_texts.values())


@arm(
    "plugin-carry",
    "a carry hook's texts (the session's PROJECT.md / MEMORY.md) ride verbatim on the compaction message",
    "a compacted chat lost its project files; carried texts are never paraphrased, carried exactly once",
    "002",
)
def plugin_carry(p: Policy) -> Policy:
    return replace(p, carry_hook=carry_plugin_files)


@arm(
    "retained",
    "the summarizer also sees the kept tail in <retained> (not to summarize) so state describes after it",
    "a summary contradicted the messages after it: two helper results and a retry landed in the tail",
    "002",
)
def retained(p: Policy) -> Policy:
    return replace(p, retained=True)


# --------------------------------------------------------------------------- seed 003


@arm(
    "empty-source-stub",
    "stub a message that can never fit the summary source (64 KiB in seed 003) only when the source is empty",
    "an oversized message was cut to the source's leftover bytes and deleted unseen by any summarizer",
    "003",
)
def empty_source_stub(p: Policy) -> Policy:
    return replace(p, stub_rule=stub_if_empty)


# --------------------------------------------------------------------------- seed 004


def previous_as_marker(p: Pass) -> str | None:
    """The earlier summary projected as a short marker, not in full."""
    if p.previous is None:
        return None
    n = get_counter(p.job.settings.tokenizer)(p.previous.meta[SUMMARY_META])
    return f"[prior summary, {n} tokens]"


@arm(
    "no-stack",
    "prior summaries reach the summarizer as a short marker, not in full",
    "each summary embedded the previous ones: 3 KB -> 1.1 MB over 7 compactions, then every request 400",
    "004",
)
def no_stack(p: Policy) -> Policy:
    return replace(p, previous=previous_as_marker)


def cap_digest(p: Pass, summary: str) -> str:
    """Cap the summary at ``summary_max_tokens`` (chars/4), keeping its first third and last two
    thirds (the compaction guard keeps the first 2,000 + last 4,000 chars)."""
    limit = p.job.settings.summary_max_tokens * 4
    if len(summary) <= limit:
        return summary
    marker = f"\n[… {len(summary) - limit} chars cut by the digest cap …]\n"
    head = (limit - len(marker)) // 3
    return summary[:head] + marker + summary[-(limit - len(marker) - head) :]


@arm(
    "digest-cap",
    "the summary is capped to the summary token budget after the call (head + tail kept)",
    "nothing capped the digest: new_summary = old_summary + new material, every time",
    "004",
)
def digest_cap(p: Policy) -> Policy:
    return replace(p, postprocess=(*p.postprocess, cap_digest))


FALLBACK_RATIO = 0.75


def hard_trim(p: Pass, o: Outcome) -> Outcome:
    """A compaction leaving the context above 75% of the window failed: drop the summary and
    keep only system messages and the keep-recent tail (what left unseen is loss)."""
    job = p.job
    after = sum(job.tokens(m) for m in o.new_context)
    if after <= FALLBACK_RATIO * job.settings.window:
        return o
    ctx = job.context
    covered, i = 0, len(ctx)
    while i > 0 and covered < job.settings.keep_recent:
        i -= 1
        covered += job.tokens(ctx[i])
    cut = snap_to_assistant(ctx, i) or p.cut
    kept = [m for m in ctx[:cut] if m.role == "system"] + ctx[cut:]
    return Outcome(
        kept,
        "",
        None,
        o.request,
        o.recipe,
        source_chars=o.source_chars,
        request_key=o.request_key,
        meta={"fallback": "hard-trim", "failed_summary_chars": len(o.summary), "failed_tokens_after": after},
    )


@arm(
    "fallback-trim",
    "a compaction leaving the context above 75% of the window counts as failed and falls back to a hard trim",
    "compaction #7 left the meter at 648.8K/256K and passed the yield gate; the session then 400ed to death",
    "004",
)
def fallback_trim(p: Policy) -> Policy:
    inner = p.accept
    return replace(p, accept=lambda ps, o: hard_trim(ps, inner(ps, o)))


def not_redundant(p: Pass) -> bool:
    """Skip a compaction whose first-kept message equals the previous compaction's."""
    first = next((m.id for m in p.tail if not is_made(m)), None)
    return first is None or first != p.job.state.get("first_kept")


@arm(
    "skip-redundant",
    "no compaction whose first-kept message equals the previous one's",
    "compactions 2/3 and 6/7 shared a firstKeptEntryId: the second re-summarized the same range",
    "004",
)
def skip_redundant(p: Policy) -> Policy:
    inner = p.gate
    return replace(p, gate=lambda ps: inner(ps) and not_redundant(ps))


# --------------------------------------------------------------------------- observation masking


def mask_observations(job, policy: Policy) -> Outcome | None:
    """No summary: tool outputs before the keep-recent cut become a placeholder."""
    cut = policy.cut(job)
    if cut is None:
        return None
    new_head, accounting = [], {}
    for m in job.context[:cut]:
        results = m.tool_results()
        if not results or m.meta.get("evalkit_masked"):
            new_head.append(m)
            continue
        masked = mask_outputs(m)
        if message_chars(masked) >= message_chars(m):
            new_head.append(m)  # a placeholder longer than the output would grow the context
            continue
        new_head.append(masked)
        elided = sum(len(r.output) for r in results)
        accounting[m.id] = (max(0, message_chars(m) - elided), elided)
    if not accounting:
        return None
    return Outcome(new_head + job.context[cut:], accounting=accounting)


@arm(
    "masking",
    "observation masking: no summary, tool outputs before the keep-recent cut replaced by a placeholder",
    "masking old tool outputs matched LLM summarization at half the cost on SWE-bench Verified (Complexity Trap)",
    "-",
)
def masking(p: Policy) -> Policy:
    return replace(p, compact=mask_observations)


# --------------------------------------------------------------------------- the ceiling


def keep_everything(job, policy: Policy) -> Outcome | None:
    """Never compact: an event (the whole context, nothing removed) each time the context has
    grown by what the trigger's arms keep after a compaction, so the exam is asked along the
    session against the full history, whatever the window."""
    s = job.settings
    size = len(job.context) if s.trigger == "messages" else job.tokens_in_context()
    step = s.kept_messages if s.trigger == "messages" else s.keep_recent
    last = job.state.get("uncompacted_size")
    if last is not None and size - last < step:
        return None
    job.state["uncompacted_size"] = size
    return Outcome(list(job.context), meta={"uncompacted": True})


@arm(
    "uncompacted",
    "the ceiling: never compacts; probes are answered against the full history, whatever the window",
    "every scorecard needs its 100% reference (hermes-agent: uncompacted 96.7%)",
    "-",
)
def uncompacted(p: Policy) -> Policy:
    return replace(p, compact=keep_everything)


# --------------------------------------------------------------------------- the floor


def drop_history(job, policy: Policy) -> Outcome | None:
    """No summary and nothing carried: the head before the keep-recent cut is removed (system
    messages stay). What the exam asks about that region is then unanswerable: the floor."""
    cut = policy.cut(job)
    if cut is None:
        return None
    head = job.context[:cut]
    kept = [m for m in head if m.role == "system"]
    accounting = {m.id: (0, 0) for m in head if m.role != "system" and not is_made(m)}
    return Outcome(kept + job.context[cut:], accounting=accounting, meta={"floor": True})


@arm(
    "no-history",
    "the floor: the head before the keep-recent cut is dropped with no summary; exams must score it below the ceiling",
    "an exam whose uncompacted ceiling does not beat its no-history floor cannot tell arms apart",
    "-",
)
def no_history(p: Policy) -> Policy:
    return replace(p, compact=drop_history)


# --------------------------------------------------------------------------- recovery


def with_recovery(p: Policy) -> Policy:
    """The arm's own compaction, its events marked so the answerer may make one search over the
    removed region (:mod:`evalkit.score.recovery` documents the tool call and its charge)."""
    from evalkit.replay.compactor import run_pipeline

    inner = p.compact

    def compact(job, policy: Policy) -> Outcome | None:
        o = inner(job, policy) if inner is not None else run_pipeline(job, policy)
        if o is not None:
            o.meta = {**o.meta, "recovery": {"searches": 1}}
        return o

    return replace(p, compact=compact)


@arm(
    "recover",
    "after the baseline compaction the answerer may make one lexical search over the removed region (composes: no-stack+recover)",
    "hermes-agent 2026-08: one search round trip after compaction, +22.5 points recall at 0.30x the tokens of the ceiling",
    "-",
)
def recover(p: Policy) -> Policy:
    return with_recovery(p)


__all__ = ["ARMS", "Candidate", "policy_for"]
