"""Summary form: template headings in order, refusals, placeholders and stand-in labels in a summary."""

from __future__ import annotations

import math
import re

from evalkit.score.base import ProbeInput, ProbeValue, probe

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
    from evalkit.replay.prompt import TEMPLATE

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
