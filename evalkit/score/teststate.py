"""Test state probes: the latest test tally and the failing commands, still visible after a compaction.

"Visible" means the model-visible context after the compaction (summary message, carried texts
and the kept tail, as :meth:`ProbeInput.visible_text` rebuilds it); "before the compaction point"
means at or before the event's ``at_message``."""

from __future__ import annotations

from collections.abc import Callable

from evalkit.facts import TallyFact
from evalkit.score import tallymatch
from evalkit.score.base import ProbeInput, ProbeValue, SessionView, fold_ws, normalize, probe, share


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

    Matching is count-exact and layout-free (:mod:`evalkit.score.tallymatch`): "pytest: 12 passed,
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
    return [ProbeValue("failures_known", share(hits))]
