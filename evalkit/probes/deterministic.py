"""Deterministic probes: no model, facts against the post-compaction context."""

from __future__ import annotations

import re

from evalkit.probes.base import ProbeInput, ProbeValue, probe


def _norm(text: str) -> str:
    """Case, whitespace and punctuation folded, for normalized matching."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


@probe(
    "tally_present",
    "the latest test tally before the compaction point is still visible after it",
    metrics={"tally_present": "higher"},
    catches="test results lost from the summary (seed 000, 66% past 2,000 chars)",
)
def tally_present(inp: ProbeInput) -> list[ProbeValue]:
    before = [t for t in inp.facts.tallies if t.message_index <= inp.event.at_message]
    if not before:
        return []  # nothing to find: no row, rather than a fake 1 or 0
    latest = before[-1]
    found = latest.line.strip() in inp.visible_text()
    return [ProbeValue("tally_present", float(found))]


@probe(
    "constraints_kept",
    "share of user constraints stated so far that survive the compaction",
    metrics={"constraints_kept": "higher"},
    catches="user instructions lost after compaction (~17% kept)",
)
def constraints_kept(inp: ProbeInput) -> list[ProbeValue]:
    stated = [c for c in inp.facts.constraints if c.message_index <= inp.event.at_message]
    if not stated:
        return []
    visible = inp.visible_text()
    kept = sum(c.text in visible for c in stated)
    return [ProbeValue("constraints_kept", kept / len(stated))]
