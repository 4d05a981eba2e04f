"""One session's viewer data: per arm, each compaction's resulting context, the facts it kept or
lost, and the exam questions asked there.

Kept/lost uses the probes' own tests (:mod:`evalkit.score.teststate`, ``intent``,
``identifiers``), so a fact marked lost here is one the metrics counted as lost. Every text is
redacted here and escaped by the page (it is set as text, never as markup).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.common.files import Span, read_span
from evalkit.common.plaintext import message_plain_text
from evalkit.common.redact import redact_text
from evalkit.contracts.event import Event
from evalkit.contracts.session import session_from_dict
from evalkit.facts import compute_facts, facts_from_dict
from evalkit.score.base import ProbeInput, SessionView, normalize
from evalkit.score.identifiers import left_view, question_id, visible_in_context
from evalkit.score.intent import _plain_visible
from evalkit.score.tallymatch import describe
from evalkit.score.teststate import latest_tally, tally_visible

TEXT_CAP = 20_000  # characters of one summary or carried text shown (the rest is counted, not shown)
REMOVED_SHOWN = 30  # messages of the context before compaction shown per event (the latest ones)
REMOVED_CHARS = 400  # characters shown of each of them
IDENTIFIERS_SHOWN = 12  # identifiers that left the view, latest first


@dataclass(frozen=True)
class SessionJob:
    """What a worker needs to build one session's files (spans into the run's JSONL files)."""

    run_dir: str
    session: str
    chunk: str  # file-name stem of the session's data files
    corpus: tuple[str, Span]
    facts: tuple[str, Span] | None
    events: dict[str, tuple[str, str, list[Span]]]  # arm -> (file name part, events path, spans)
    questions: dict[str, str]  # judge question id -> its text
    grades: dict[tuple[str, int], list[tuple[str, float | None, str | None]]]  # (arm, event) -> rows
    out_dir: str


# Redaction runs on this much beyond what is shown, so a secret starting inside the shown part is
# matched whole (a 4096-bit private key block is ~3.3k characters) and never half-shown, while a
# 200 kB tool output is not scanned to show 400 characters of it.
REDACT_MARGIN = 8_192


def cap(text: str, limit: int = TEXT_CAP) -> str:
    """``text`` redacted and cut at ``limit`` characters with a note of how much was left out."""
    text = text or ""
    shown = redact_text(text[: limit + REDACT_MARGIN])
    if len(text) <= limit + REDACT_MARGIN and len(shown) <= limit:
        return shown
    return shown[:limit] + f"\n[… {max(len(text) - limit, 1):,} more characters]"


def _facts(inp: ProbeInput) -> list[list[Any]]:
    """[kind, text, kept] for the facts known at the compaction point."""
    at = inp.event.at_message
    out: list[list[Any]] = []
    t = latest_tally(inp)
    if t is not None:
        out.append(["latest tally", cap(describe(t), 300), tally_visible(inp, t)])
    for c in dict.fromkeys(c.text for c in inp.facts.constraints if c.message_index <= at):
        out.append(["constraint", cap(c, 500), _plain_visible(inp, c)])
    open_: dict[str, Any] = {}
    for f in inp.facts.failures:
        if f.message_index <= at and (f.fixed_at is None or f.fixed_at > at):
            open_[f.normalized] = f
    for f in open_.values():
        kept = inp.visible_has(normalize(f.error_line or f.command), "norm")
        out.append(["failing command", cap(f"{f.command} → {f.error_line}", 400), kept])
    for ident in left_view(inp)[-IDENTIFIERS_SHOWN:][::-1]:
        out.append([f"identifier ({ident.kind})", cap(ident.value, 300), visible_in_context(inp, ident)])
    return out


def _removed(inp: ProbeInput) -> dict[str, Any]:
    """The messages this compaction took out of the view (the latest :data:`REMOVED_SHOWN`); each
    message's excerpt is made once per session (every arm removes mostly the same ones)."""
    ids = inp.event.removed_ids
    excerpts = inp.view.memo(("view_excerpts",), dict)
    shown = []
    for mid in ids[-REMOVED_SHOWN:]:
        msg = inp.view.by_id.get(mid)
        if msg is not None:
            if mid not in excerpts:
                excerpts[mid] = cap(message_plain_text(msg), REMOVED_CHARS)
            shown.append([inp.view.index[mid], msg.role, excerpts[mid]])
    return {"count": len(ids), "shown": shown}


def _kept(inp: ProbeInput) -> dict[str, Any]:
    """The kept tail's boundaries: recorded messages kept as they were, and masked."""
    kept, masked = inp.kept_positions()
    return {
        "recorded": len(kept),
        "masked": len(masked),
        "ranges": ranges(sorted(kept | masked)),
        "first_id": inp.event.first_kept_id,
    }


def ranges(positions: list[int]) -> str:
    """Sorted message indexes as runs: ``0–1, 664–671``."""
    runs: list[list[int]] = []
    for p in positions:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(f"{a}–{b}" if a != b else str(a) for a, b in runs)


def _question_label(metric: str, questions: dict[str, str], idents: dict[str, str]) -> str:
    family, _, qid = metric.partition(":")
    if family.startswith("judge") and qid in questions:
        return questions[qid]
    if family.startswith("identifier") and qid in idents:
        return f"{qid.split(':')[0]}: {idents[qid]}"
    return qid


def build_session(job: SessionJob) -> dict[str, Any]:
    """Write one file per arm for the session (``<chunk>-<arm>.js``); return the per-arm event
    counts (the overview's session list)."""
    session = session_from_dict(json.loads(read_span(*job.corpus)))
    facts = facts_from_dict(json.loads(read_span(*job.facts))) if job.facts else compute_facts(session)
    view = SessionView(session, facts)
    idents = {question_id(i): cap(i.value, 200) for i in facts.identifiers}
    counts: dict[str, int] = {}
    for arm, (part, path, spans) in job.events.items():
        events = [Event.from_dict(json.loads(read_span(path, s))) for s in spans]
        events.sort(key=lambda e: (e.replicate, e.event))
        rows = []
        for k, ev in enumerate(events):
            inp = ProbeInput(ev, view, events[:k], events[k + 1 :])
            rows.append(
                {
                    "event": ev.event,
                    "round": ev.round,
                    "replicate": ev.replicate,
                    "trigger": ev.trigger,
                    "at": ev.at_message,
                    "before": ev.tokens_before,
                    "after": ev.tokens_after,
                    "window": ev.window,
                    "over": ev.invariants.over_limit,
                    "summary": cap(ev.summary),
                    "error": cap(ev.summary_error, 2_000) if ev.summary_error else None,
                    "carried": [cap(c) for c in ev.carried],
                    "kept": _kept(inp),
                    "removed": _removed(inp),
                    "facts": _facts(inp),
                    "questions": [
                        [_question_label(m, job.questions, idents), v, cap(e, 300) if e else None]
                        for m, v, e in job.grades.get((arm, ev.event), [])
                    ],
                }
            )
        counts[arm] = len(rows)
        payload = {"session": job.session, "arm": arm, "messages": len(session.messages), "events": rows}
        write_data(Path(job.out_dir) / f"{job.chunk}-{part}.js", f"{job.chunk}/{arm}", payload)
    return {"session": job.session, "chunk": job.chunk, "events": counts}


def write_data(path: Path, key: str, payload: Any) -> None:
    """A data file the page loads with ``<script src>`` (works from ``file://``, unlike fetch):
    ASCII JSON with ``<``, ``>`` and ``&`` as ``\\u`` escapes (they only occur inside strings), so no
    text from a session is markup in any file, even if one were ever inlined into a page."""
    body = json.dumps(payload, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=_plain)
    body = body.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    path.write_text(f"EVK.put({json.dumps(key)},{body});\n", encoding="ascii")


def _plain(x: Any) -> Any:
    """JSON for numpy scalars (values from the metrics table)."""
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"not JSON: {type(x).__name__}")
