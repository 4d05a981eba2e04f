"""User intent and artifacts: the user's constraints and the files worked on, still visible after a compaction."""

from __future__ import annotations

from evalkit.score.base import ProbeInput, ProbeValue, normalize, probe, share


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
        ProbeValue("constraints_kept", share([_plain_visible(inp, c) for c in stated])),
        ProbeValue(
            "constraints_kept_normalized", share([inp.visible_has(normalize(c), "norm") for c in stated])
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
    return [ProbeValue("files_known", share([_plain_visible(inp, p) for p in paths]))]


def _plain_visible(inp: ProbeInput, text: str) -> bool:
    """``text in inp.visible_text()``: per message where ``text`` cannot span two of them (the
    visible text joins messages with a blank line)."""
    if "\n" in text or text != text.strip():
        return text in inp.visible_text()
    return inp.visible_has(text)
