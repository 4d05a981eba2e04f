"""Deterministic probes: no model, the session's facts against the post-compaction context.

"Visible" always means the model-visible context after the compaction (summary message, carried
texts and the kept tail, as :meth:`ProbeInput.visible_text` rebuilds it); "before the compaction
point" means at or before the event's ``at_message``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from evalkit.events import Event
from evalkit.facts import TallyFact
from evalkit.probes import tallymatch
from evalkit.probes.base import ProbeInput, ProbeValue, SessionView, fold_ws, normalize, probe
from evalkit.tokens import get_counter

# --------------------------------------------------------------------------- shared helpers


def latest_tally(inp: ProbeInput) -> TallyFact | None:
    """The last test tally at or before the compaction point."""
    at = inp.event.at_message
    before = [t for t in inp.facts.tallies if t.message_index <= at]
    return before[-1] if before else None


def latest_run_unknown(inp: ProbeInput, t: TallyFact | None) -> bool:
    """The latest test run before the compaction point printed no parsable tally (cut off,
    crashed, another reporter): its result is unknown, and an older tally is not "latest"."""
    at = inp.event.at_message
    runs = [i for i in inp.facts.untallied_runs if i <= at]
    return bool(runs) and (t is None or runs[-1] > t.message_index)


def latest_long_removed(inp: ProbeInput, long_chars: int) -> TallyFact | None:
    """The tally of the latest test output longer than ``long_chars`` that this compaction removed."""
    removed = inp.memo("removed", lambda: set(inp.event.removed_ids))
    msgs = inp.session.messages
    gone = [
        t
        for t in inp.facts.tallies
        if t.output_chars > long_chars and t.message_index < len(msgs) and msgs[t.message_index].id in removed
    ]
    return gone[-1] if gone else None


def _verbatim_line(line: str) -> str | None:
    # Only lines that carry numbers: a bare "FAIL" or "OK" line would match anywhere.
    line = fold_ws(line)
    return line if len(line) >= 8 and any(c.isdigit() for c in line) else None


def _verbatim_tally(line: str, folded_text: str) -> bool:
    folded = _verbatim_line(line)
    return folded is not None and folded in folded_text


def _may_state_at(view: SessionView, t: TallyFact, masked: bool) -> frozenset[int] | None:
    """Session indexes of the recorded messages (or masked copies) holding the numbers a mention
    satisfying ``t`` must state (every non-zero failed/error count, and the passed count or the
    total: :func:`tallymatch.satisfies`); None when any message may. Found with the session's
    text index, shared by every tally asking for the same number."""

    def build() -> frozenset[int] | None:
        must, either = _numbers(t)
        found: frozenset[int] | None = None
        for n in must:
            hits = view.hits(n, masked=masked)
            found = hits if found is None else found & hits
        if either:
            hits = view.hits(either[0], masked=masked) | view.hits(either[1], masked=masked)
            found = hits if found is None else found & hits
        return found

    return view.memo(("tally_may_state", t, masked), build)


def _kept_state(inp: ProbeInput, t: TallyFact, kept: frozenset[int], masked: bool) -> bool:
    """Whether a kept recorded message (or masked copy) states ``t``. Only the kept messages that
    hold its numbers are tokenized, each once per session (and the answer per tally cached)."""
    view = inp.view
    may = _may_state_at(view, t, masked)
    texts = view.form_texts("plain", masked)
    for i in sorted(kept if may is None else kept & may):
        found = view.memo(("mentions", masked, i), lambda x=texts[i]: tallymatch.mentions(x))
        if view.memo(("tally_states", t, masked, i), lambda f=found: tallymatch.found_in(f, t)):
            return True
    return False


def _numbers(t: TallyFact) -> tuple[list[str], list[str]]:
    """The numbers a mention satisfying ``t`` must state: all of the first, one of the second."""
    must = [str(n) for n in (t.failed, t.errors) if n]
    either = [str(t.passed), str(t.passed + t.failed + t.errors + t.skipped)] if t.passed else []
    return must, either


def _may_state(t: TallyFact) -> Callable[[str], bool]:
    """A cheap filter: does a text contain the numbers a mention satisfying ``t`` must state?"""
    must, either = _numbers(t)
    return lambda text: all(n in text for n in must) and (not either or any(n in text for n in either))


def tally_visible(inp: ProbeInput, t: TallyFact) -> bool:
    """Is tally ``t`` stated anywhere in the new context (one message states it, or its runner's
    line is there verbatim)?"""
    if any(
        _may_state(t)(x) and tallymatch.found_in(tallymatch.mentions(x), t)
        for x in inp.fresh_index("plain").texts
    ):
        return True
    kept, masked = inp.kept_positions()
    if _kept_state(inp, t, kept, False) or (masked and _kept_state(inp, t, masked, True)):
        return True
    line = _verbatim_line(t.line)
    return line is not None and inp.visible_has(line, "folded")


def tally_in_text(text: str, t: TallyFact) -> bool:
    return tallymatch.found_in(tallymatch.mentions(text), t) or _verbatim_tally(t.line, fold_ws(text))


def _share(hits: list[bool]) -> float:
    return sum(hits) / len(hits)


def summary_tokens(inp: ProbeInput, ev: Event, tokenizer: str) -> int:
    return inp.view.memo(
        ("summary_tokens", tokenizer, ev.summary), lambda: get_counter(tokenizer)(ev.summary)
    )


# --------------------------------------------------------------------------- test state


@probe(
    "tally_present",
    "the latest test tally before the compaction point is still visible after it (count-exact)",
    metrics={
        "tally_present": "higher",
        "tally_in_summary": "higher",
        "tally_present_left_view": "higher",
        "tally_left_view_early": "info",
    },
    catches="test results lost from the summary (seed 000: 66% of long test outputs had the tally past char 2,000)",
)
def tally_present(inp: ProbeInput, long_chars: int = 2_000) -> list[ProbeValue]:
    """The latest tally (runner counts) is visible after the compaction.

    Matching is count-exact and layout-free (:mod:`evalkit.probes.tallymatch`): "pytest: 12 passed,
    3 failed" in a summary counts, "12 passed" alone does not, nor does an older tally. Metrics:

    - ``tally_present``: anywhere in the new context; ``tally_in_summary``: in the summary alone.
    - ``tally_present_left_view``: on events whose compaction removed a *long* test output
      (longer than ``long_chars``, the re-render's cut), the tally of the latest such output: is
      it still stated after the compaction? Only the summary (or a carry) can keep it, and a
      head-only re-render shows the summarizer the first ``long_chars`` characters.
    - ``tally_left_view_early`` (info, same events): the tally line ends within the first
      ``long_chars`` characters, so a head-only re-render showed it to the summarizer. Its mean
      is the share a head-only summarizer can at best keep.

    No tally before the compaction point: no rows (nothing to find is neither 0 nor 1).
    """
    t = latest_tally(inp)
    if latest_run_unknown(inp, t):
        return [
            ProbeValue("tally_present", None, error="unknown: the latest test run printed no parsable tally")
        ]
    if t is None:
        return []
    present = tally_visible(inp, t)
    out = [
        ProbeValue("tally_present", float(present)),
        ProbeValue("tally_in_summary", float(tally_in_text(inp.event.summary, t))),
    ]
    long = latest_long_removed(inp, long_chars)
    if long is not None:
        kept = present if long is t else tally_visible(inp, long)
        out.append(ProbeValue("tally_present_left_view", float(kept)))
        out.append(ProbeValue("tally_left_view_early", float(long.offset + len(long.line) <= long_chars)))
    return out


@probe(
    "failures_known",
    "share of commands still failing at the compaction point whose error is visible after it",
    metrics={"failures_known": "higher"},
    catches="the agent re-runs a failing command because the summary forgot it failed (20% re-fail)",
)
def failures_known(inp: ProbeInput) -> list[ProbeValue]:
    """Per command that failed before the compaction point and was not fixed by then (its latest
    failure), is the error line (normalized: case, whitespace, punctuation) still visible?"""
    at = inp.event.at_message
    open_: dict[str, object] = {}
    for f in inp.facts.failures:
        if f.message_index <= at and (f.fixed_at is None or f.fixed_at > at):
            open_[f.normalized] = f
    if not open_:
        return []
    hits = [inp.visible_has(normalize(f.error_line or f.command), "norm") for f in open_.values()]  # type: ignore[attr-defined]
    return [ProbeValue("failures_known", _share(hits))]


# --------------------------------------------------------------------------- user intent and artifacts


@probe(
    "constraints_kept",
    "share of user constraints stated so far that survive the compaction (verbatim / normalized)",
    metrics={"constraints_kept": "higher", "constraints_kept_normalized": "higher"},
    catches="user instructions ignored after compaction (~17% kept by summaries, 93-99.7% when carried)",
)
def constraints_kept(inp: ProbeInput) -> list[ProbeValue]:
    """Each distinct constraint line stated at or before the compaction point, searched in the new
    context verbatim (``constraints_kept``) and with case, whitespace and punctuation folded
    (``constraints_kept_normalized``). A paraphrase counts for neither: what the model obeys is
    the user's wording, and paraphrase is how constraints drift."""
    at = inp.event.at_message
    stated = list(dict.fromkeys(c.text for c in inp.facts.constraints if c.message_index <= at))
    if not stated:
        return []
    return [
        ProbeValue("constraints_kept", _share([_plain_visible(inp, c) for c in stated])),
        ProbeValue(
            "constraints_kept_normalized", _share([inp.visible_has(normalize(c), "norm") for c in stated])
        ),
    ]


@probe(
    "files_known",
    "share of files modified so far that the new context names (the artifact trail)",
    metrics={"files_known": "higher"},
    catches="finished work redone or re-read after compaction; artifact trail is the weakest judge dimension",
)
def files_known(inp: ProbeInput) -> list[ProbeValue]:
    """Distinct paths modified at or before the compaction point, searched verbatim in the new context."""
    at = inp.event.at_message
    paths = list(dict.fromkeys(f.path for f in inp.facts.files_modified if f.message_index <= at))
    if not paths:
        return []
    return [ProbeValue("files_known", _share([_plain_visible(inp, p) for p in paths]))]


def _plain_visible(inp: ProbeInput, text: str) -> bool:
    """``text in inp.visible_text()``: per message where ``text`` cannot span two of them (the
    visible text joins messages with a blank line)."""
    if "\n" in text or text != text.strip():
        return text in inp.visible_text()
    return inp.visible_has(text)


# --------------------------------------------------------------------------- size and growth


@probe(
    "summary_size",
    "words and tokens of the summary",
    metrics={"summary_words": "lower", "summary_tokens": "lower"},
    catches="summaries that bloat (median 771 → 2,167 words by round five)",
)
def summary_size(inp: ProbeInput, tokenizer: str = "chars4") -> list[ProbeValue]:
    """Size of the summary text alone (carried texts and the splice line excluded)."""
    s = inp.event.summary
    return [
        ProbeValue("summary_words", float(len(s.split()))),
        ProbeValue("summary_tokens", float(summary_tokens(inp, inp.event, tokenizer))),
    ]


@probe(
    "compression",
    "context tokens after the compaction ÷ before it",
    metrics={"compression": "lower"},
    catches="compactions that barely shrink the context (seed 004: 'saved ~5.3k tokens')",
)
def compression(inp: ProbeInput) -> list[ProbeValue]:
    """``tokens_after / tokens_before`` as replay measured them."""
    ev = inp.event
    if ev.tokens_before <= 0:
        return [ProbeValue("compression", None, "tokens_before is 0")]
    return [ProbeValue("compression", ev.tokens_after / ev.tokens_before)]


_MIN_STACK_CHARS = 80  # shorter summaries are too generic for containment to mean re-embedding


def stacked(summary: str, earlier: list[str]) -> bool:
    """Does ``summary`` contain an earlier summary's whole text (whitespace folded)?"""
    s = fold_ws(summary)
    return any(len(e) >= _MIN_STACK_CHARS and e in s for e in (fold_ws(x) for x in earlier))


@probe(
    "growth",
    "summary size by round relative to round 1, and summaries that embed earlier summaries",
    metrics={"summary_growth": "lower", "stacked": "lower", "growth": "lower"},
    catches="summaries compounding round over round until the session 400s (seed 004)",
)
def growth(inp: ProbeInput, tokenizer: str = "chars4") -> list[ProbeValue]:
    """Per event: ``summary_growth`` = summary tokens ÷ the round-1 summary's; ``stacked`` (from
    round 2) = the summary contains an earlier round's whole summary. Per session (event = -1,
    emitted with the arm's last event, sessions with ≥ 2 compactions): ``growth`` = the last
    successful summary's tokens ÷ round 1's. A failed round-1 summary makes the ratios errors."""
    ev = inp.event
    events = [*inp.previous, ev]
    first = events[0]
    out: list[ProbeValue] = []
    base = None if first.summary_error else summary_tokens(inp, first, tokenizer)
    if base:
        out.append(ProbeValue("summary_growth", summary_tokens(inp, ev, tokenizer) / base))
    else:
        out.append(ProbeValue("summary_growth", None, "round-1 summary failed or is empty"))
    if inp.previous:
        earlier = [e.summary for e in inp.previous if not e.summary_error]
        out.append(ProbeValue("stacked", float(stacked(ev.summary, earlier))))
    if inp.is_last and len(events) >= 2:
        good = [e for e in events[1:] if not e.summary_error]
        if not base:
            out.append(ProbeValue("growth", None, "round-1 summary failed or is empty", session_level=True))
        elif not good:
            out.append(ProbeValue("growth", None, "no later summary succeeded", session_level=True))
        else:
            out.append(
                ProbeValue("growth", summary_tokens(inp, good[-1], tokenizer) / base, session_level=True)
            )
    return out


@probe(
    "redundant",
    "a compaction whose first kept message equals the previous compaction's (re-summarized range)",
    metrics={"redundant": "lower"},
    catches="compactions re-summarizing what the previous one already summarized (seed 004)",
)
def redundant(inp: ProbeInput) -> list[ProbeValue]:
    """From round 2 on: 1 when ``first_kept_id`` is the previous event's, else 0. An error when
    either compaction failed without removing anything: it summarized nothing, so "the same
    range again" is the failure showing, not redundancy (its own failure is the scorer's
    ``needs_summary``)."""
    if not inp.previous:
        return []
    if inp.previous[-1].summary_error and not inp.previous[-1].removed_ids:
        return [
            ProbeValue("redundant", None, f"previous compaction failed: {inp.previous[-1].summary_error}")
        ]
    prev = inp.previous[-1].first_kept_id
    return [ProbeValue("redundant", float(prev is not None and inp.event.first_kept_id == prev))]


# --------------------------------------------------------------------------- replay invariants


@probe(
    "over_limit",
    "the context after compaction is above the window: the session is dead",
    metrics={"over_limit": "lower"},
    catches="compaction that cannot bring the context under the limit; every request 400s (seed 004)",
    needs_summary=False,
)
def over_limit(inp: ProbeInput) -> list[ProbeValue]:
    """Replay's ``over_limit`` invariant, or ``tokens_after > window`` when replay did not set it."""
    ev = inp.event
    return [ProbeValue("over_limit", float(ev.invariants.over_limit or ev.tokens_after > ev.window))]


@probe(
    "lost_chars",
    "characters that left the view unseen by any summarizer, not kept, not carried",
    metrics={"lost_chars": "lower", "truncated_chars": "info"},
    catches="content deleted without ever being shown to a summarizer (seed 003)",
    needs_summary=False,
)
def lost_chars(inp: ProbeInput) -> list[ProbeValue]:
    """Replay's ``lost_chars`` invariant, and ``truncated_chars``: characters the summarizer's
    re-render cut by policy (the 2,000-character tool-output cut), which are not lost content."""
    ev = inp.event
    return [
        ProbeValue("lost_chars", float(ev.invariants.lost_chars)),
        ProbeValue("truncated_chars", float(ev.truncated_chars)),
    ]


@probe(
    "tool_pairs_valid",
    "every tool call in the new context is answered by exactly one result",
    metrics={"tool_pairs_valid": "higher"},
    catches="tool results left without their calls after compaction (provider 400s)",
    needs_summary=False,
)
def tool_pairs_valid(inp: ProbeInput) -> list[ProbeValue]:
    """Replay's ``tool_pairs_valid`` invariant as 1/0."""
    return [ProbeValue("tool_pairs_valid", float(inp.event.invariants.tool_pairs_valid))]


def request_text(event) -> str:
    """The literal text of an event's summarizer request: system prompt and the literal parts of
    the user prompt (previous summary, earlier carried blocks, instructions).

    Replay stores the rest of the prompt as spans of recorded messages. Carried texts are made
    by compactors from messages that already left the view, so they can only reach a later
    summarizer through the literal parts; the spans need not be re-rendered to check them."""
    parts: list[str] = []
    for m in (event.request or {}).get("messages", []):
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, dict):
            parts.extend(p for p in c.get("parts", []) if isinstance(p, str))
    return "\n".join(parts)


@probe(
    "carry_once",
    "each carried text is in the next request exactly once and in no later summarizer request",
    metrics={
        "carry_once": "higher",
        "carry_missing": "lower",
        "carry_duplicated": "lower",
        "carry_resummarized": "lower",
    },
    catches="carried texts duplicated, dropped, or paraphrased by later summarizers (seed 002)",
)
def carry_once(inp: ProbeInput) -> list[ProbeValue]:
    """For each non-empty carried text: occurrences in the new context (the next request the
    model reads) and presence in any later event's summarizer request. ``carry_once`` = share
    with exactly one occurrence and absent from every later summarizer request."""
    texts = [t for t in inp.event.carried if t and t.strip()]
    if not texts:
        return []
    visible = inp.visible_text()
    arm = inp.event.arm
    later = [
        inp.view.memo(("request_text", arm, e.event, e.replicate), lambda e=e: request_text(e))
        for e in inp.later
    ]
    counts = [visible.count(t) for t in texts]
    resum = [any(t in r for r in later) for t in texts]
    return [
        ProbeValue("carry_once", _share([c == 1 and not r for c, r in zip(counts, resum, strict=True)])),
        ProbeValue("carry_missing", _share([c == 0 for c in counts])),
        ProbeValue("carry_duplicated", _share([c > 1 for c in counts])),
        ProbeValue("carry_resummarized", _share(resum)),
    ]


# --------------------------------------------------------------------------- summary form

_HEADING = re.compile(r"^\s*(#{1,4} .+?)\s*$", re.M)
_REFUSAL = re.compile(
    r"^\s*(?:I'?m sorry|I am sorry|sorry,|I can(?:no|')t|I cannot|I'?m (?:not able|unable)|I am unable|"
    r"I won'?t|As an AI|I'm afraid)",
    re.I,
)
_PLACEHOLDER = re.compile(r"^[-*•\s]*(?:\(?(?:none(?: found)?|n/?a|tbd|nothing|empty)\)?\.?)?\s*$", re.I)
_LABEL = re.compile(r"^\[offline .*stand-in.*\]$", re.I)


def template_headings(request: dict | None, template: str = "") -> list[str]:
    """The headings the summarizer was asked for: ``template`` if given, else the request's system
    prompt, else the reference template."""
    if template:
        return [h.strip() for h in _HEADING.findall(template)]
    if request:
        system = "\n".join(
            m.get("content", "") if isinstance(m.get("content"), str) else ""
            for m in request.get("messages", [])
            if isinstance(m, dict) and m.get("role") == "system"
        )
        found = [h.strip() for h in _HEADING.findall(system)]
        if found:
            return found
    from evalkit.replay.compactor import TEMPLATE

    return list(TEMPLATE)


def sections_in_order(summary: str, headings: list[str]) -> int:
    """How many of ``headings`` appear as heading lines of ``summary`` in template order."""
    lines = [h.strip().lower() for h in _HEADING.findall(summary)]
    n, pos = 0, 0
    for h in headings:
        try:
            pos = lines.index(h.lower(), pos) + 1
        except ValueError:
            continue
        n += 1
    return n


def summary_flags(summary: str, request: dict | None, meta: dict) -> dict[str, bool]:
    """empty / refusal / truncated, as :func:`structure` defines them."""
    content = [
        ln
        for ln in summary.splitlines()
        if ln.strip()
        and not _HEADING.match(ln)
        and not _PLACEHOLDER.match(ln)
        and not _LABEL.match(ln.strip())
    ]
    max_tokens = (request or {}).get("max_tokens")
    truncated = meta.get("finish_reason") == "length" or bool(
        max_tokens and math.ceil(len(summary) / 4) >= max_tokens
    )
    head = next((ln for ln in summary.splitlines() if ln.strip() and not _LABEL.match(ln.strip())), "")
    return {"empty": not content, "refusal": bool(_REFUSAL.match(head)), "truncated": truncated}


@probe(
    "structure",
    "the summary has the template's sections in order; empty, refusal and truncated summaries flagged",
    metrics={
        "structure_ok": "higher",
        "structure_sections": "higher",
        "summary_empty": "lower",
        "summary_refusal": "lower",
        "summary_truncated": "lower",
    },
    catches="empty or refusal text accepted as a summary; summaries cut off at the token cap",
)
def structure(inp: ProbeInput, template: str = "") -> list[ProbeValue]:
    """``structure_sections``: share of the template's headings present as heading lines in order
    (the template is read from the event's summarizer request, or given as ``template``).
    ``summary_empty``: no content beyond headings, placeholders ("(none found)") and the stand-in
    label; ``summary_refusal``: opens like a refusal; ``summary_truncated``: the backend reported
    ``finish_reason = length`` or the summary reached the request's ``max_tokens``.
    ``structure_ok`` = every section in order and none of the flags: a flagged summary never
    counts as good. A failed summarizer call yields error rows (the scorer's ``needs_summary``)."""
    ev = inp.event
    headings = template_headings(ev.request, template)
    flags = summary_flags(ev.summary, ev.request, ev.meta if isinstance(ev.meta, dict) else {})
    n = sections_in_order(ev.summary, headings)
    share = n / len(headings) if headings else 1.0
    return [
        ProbeValue("structure_ok", float(share == 1.0 and not any(flags.values()))),
        ProbeValue("structure_sections", share),
        ProbeValue("summary_empty", float(flags["empty"])),
        ProbeValue("summary_refusal", float(flags["refusal"])),
        ProbeValue("summary_truncated", float(flags["truncated"])),
    ]
