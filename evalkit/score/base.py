"""The probe contract and registry.

A probe is a function ``(ProbeInput, **params) -> list[ProbeValue]`` registered by name with the
metrics it emits, each metric's direction, and the failure it catches. Its keyword parameters (with
their defaults) are what a suite file may set. Probes read the event through :class:`ProbeInput`,
whose text views are cached: per message in a :class:`SessionView` shared by every event and arm of
one session (kept recorded messages are the same objects across arms), and per event for the joined
visible text, so no probe re-renders what another already rendered.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from evalkit.common.plaintext import message_plain_text
from evalkit.common.registry import Registry
from evalkit.contracts.event import Event, mask_outputs, resolve_context
from evalkit.contracts.session import Message, Session, message_from_dict
from evalkit.facts import Facts
from evalkit.score.textindex import TextIndex, Verify

DIRECTIONS = ("higher", "lower", "info")  # "info": a descriptive covariate, not a quality score

_NON_WORD = re.compile(r"[^\w\s]")


# ASCII text (nearly all of it) folds punctuation with str.translate, ~10x faster than the regex.
_ASCII_PUNCT = str.maketrans(
    {c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_" or c.isspace())}
)


def normalize(text: str) -> str:
    """Case, whitespace and punctuation folded, for normalized matching."""
    if text.isascii():
        return " ".join(text.lower().translate(_ASCII_PUNCT).split())
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def fold_ws(text: str) -> str:
    """Whitespace runs folded to one space (so a wrapped line still matches)."""
    return " ".join(text.split())


def share(hits: list[bool]) -> float:
    """The share of true values (a probe's "share of facts still visible")."""
    return sum(hits) / len(hits)


# The text forms probes search in: as the model reads it, whitespace-folded, normalized, lower-cased.
FORMS: dict[str, Callable[[str], str]] = {
    "plain": lambda t: t,
    "folded": fold_ws,
    "norm": normalize,
    "lower": str.lower,
}


def context_positions(event: Event, index: dict[str, int], n: int, strict: bool = True) -> list[int | None]:
    """Per entry of the event's new context, the recorded position it shows: the message's session
    index, ``n + index`` for its copy with tool outputs masked, None for a message the compaction
    wrote. An unknown reference raises ``KeyError``, or (``strict`` False) gives None."""
    get = index.__getitem__ if strict else index.get
    out: list[int | None] = []
    append = out.append  # bound once: this runs per entry of every context
    for e in event.new_context:
        if "ref" not in e:
            append(None)
            continue
        i = get(e["ref"])
        append(None if i is None else i + n if e.get("mask") == "outputs" else i)
    return out


class SessionView:
    """One session with per-message caches, shared by all of its events under every arm."""

    def __init__(self, session: Session, facts: Facts):
        self.session = session
        self.facts = facts
        self.by_id: dict[str, Message] = {m.id: m for m in session.messages}
        self.index: dict[str, int] = {m.id: i for i, m in enumerate(session.messages)}
        self._cache: dict[tuple, Any] = {}
        self.extras: dict[str, Any] = {}  # run-level inputs: the score context, pinned questions
        self._shown: frozenset[int] | None = None  # None: every position
        # id(event) -> (its new_context, context_positions()), from show_only()
        self.event_positions: dict[int, tuple[list, list[int | None]]] = {}

    def show_only(self, events: Iterable[Event]) -> None:
        """Render and search only the recorded positions that ``events`` show.

        Scoring knows every event of the session before it probes any: a kept message is asked
        about only within an event's context, so the session's texts outside every context
        (38-80% of a default-corpus session's characters, mostly old tool output) are never read
        and need not be rendered or searched.

        Once the view was read, its caches cover what it showed then: a later call may only show
        no more than that (scoring the same events again), else it raises ``RuntimeError``."""
        index, n = self.index, len(self.session.messages)
        found: set[int | None] = set()
        for ev in events:
            try:
                pos = context_positions(ev, index, n)
            except KeyError:  # an unknown reference: ProbeInput.positions raises it at the event
                pos = context_positions(ev, index, n, strict=False)
            else:  # kept for the event's probes (an uncompacted context has thousands of entries)
                self.event_positions[id(ev)] = (ev.new_context, pos)
            found.update(pos)
        found.discard(None)
        shown = frozenset(found)
        if self._cache:
            if self._shown is not None and not shown <= self._shown:
                raise RuntimeError(
                    "show_only() after the view was read, with events showing messages it left out"
                )
            return
        self._shown = shown

    # Recorded messages have a position: their index in the session, or ``n + index`` for the
    # copy with tool outputs masked (observation masking), so kept sets and hit sets are ints.

    def form_texts(self, form: str, masked: bool = False) -> list[str | None]:
        """Every recorded message's text in ``form`` (see :data:`FORMS`), by session index; the
        masked copies' with ``masked``. Rendered once per session, on first use; None at the
        positions :meth:`show_only` left out."""

        def build() -> list[str | None]:
            if form == "plain":
                msgs, shown = self.session.messages, self._shown
                at = len(msgs) if masked else 0
                return [  # None where no event shows the message (never read)
                    message_plain_text(self.masked_copy(m) if masked else m)
                    if shown is None or i + at in shown
                    else None
                    for i, m in enumerate(msgs)
                ]
            return [None if t is None else FORMS[form](t) for t in self.form_texts("plain", masked)]

        return self.memo(("form", form, masked), build)

    def masked_copy(self, msg: Message) -> Message:
        """``msg`` with its tool outputs masked, made once per session (events share it)."""
        masked = self.memo(("masked",), dict)
        copy = masked.get(msg.id)
        if copy is None:
            copy = masked[msg.id] = mask_outputs(msg)
        return copy

    def text_at(self, pos: int, form: str = "plain") -> str:
        """The text of the recorded message (or masked copy) at ``pos``."""
        n = len(self.session.messages)
        return self.form_texts(form, pos >= n)[pos - n if pos >= n else pos]

    def hits(
        self,
        needle: str,
        form: str = "plain",
        verify: Verify | None = None,
        key: Any = None,
        masked: bool = False,
    ) -> frozenset[int]:
        """Session indexes of the recorded messages (or their masked copies) whose ``form`` text
        contains ``needle``; ``verify`` (named by ``key`` for the cache) checks each occurrence."""

        def search() -> frozenset[int]:
            index = self.memo(
                ("textindex", form, masked),
                lambda: TextIndex(self.form_texts(form, masked), self.form_texts("plain", masked)),
            )
            return index.positions(needle, verify)

        return self.memo(("hits", needle, form, key, masked), search)

    def memo(self, key: tuple, fn: Callable[[], Any]) -> Any:
        """``fn()`` memoized under ``key`` for the life of this session's scoring."""
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]


@dataclass
class ProbeInput:
    """One event with what a probe may read: the session, its facts, and the arm's other events."""

    event: Event
    view: SessionView
    previous: list[Event] = field(default_factory=list)  # the arm's earlier events of this session
    later: list[Event] = field(default_factory=list)  # the arm's later events of this session
    _context: list[tuple[Message, bool]] | None = None
    _memo: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        event: Event,
        session: Session,
        facts: Facts,
        previous: list[Event] | None = None,
        later: list[Event] | None = None,
    ) -> ProbeInput:
        """Convenience for one-off use (tests); scoring shares one :class:`SessionView` per session."""
        return cls(event, SessionView(session, facts), list(previous or []), list(later or []))

    @property
    def session(self) -> Session:
        return self.view.session

    @property
    def facts(self) -> Facts:
        return self.view.facts

    @property
    def is_last(self) -> bool:
        """The arm's last event of this session: where session-level metrics are emitted."""
        return not self.later

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """Per-event cache for values several probes derive (the visible text, its lines...)."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def context_entries(self) -> list[tuple[Message, bool]]:
        """(message, recorded) for the post-compaction context, in order."""
        if self._context is None:
            refs = [("ref" in e) for e in self.event.new_context]
            msgs = resolve_context(self.event, self.view.by_id, self.view.memo(("masked",), dict))
            self._context = list(zip(msgs, refs, strict=True))
        return self._context

    def context(self) -> list[Message]:
        return [m for m, _ in self.context_entries()]

    def positions(self) -> list[int | None]:
        """Per context entry, the recorded position it shows (:meth:`SessionView.form_texts`), or
        None for a message the compaction wrote (summary, carried text)."""

        def build() -> list[int | None]:
            known = self.view.event_positions.get(id(self.event))
            if known is not None and known[0] is self.event.new_context:
                return known[1]
            return context_positions(self.event, self.view.index, len(self.view.session.messages))

        return self.memo("positions", build)

    def kept_positions(self) -> tuple[frozenset[int], frozenset[int]]:
        """Session indexes of the recorded messages kept as they were, and of those kept masked."""

        def build() -> tuple[frozenset[int], frozenset[int]]:
            n = len(self.view.session.messages)
            pos = [p for p in self.positions() if p is not None]
            return frozenset(p for p in pos if p < n), frozenset(p - n for p in pos if p >= n)

        return self.memo("kept_positions", build)

    def fresh_index(self, form: str) -> TextIndex:
        """The messages this compaction wrote (summary, carried texts), in ``form``."""

        def build() -> TextIndex:
            msgs = [
                message_from_dict(e["message"], f"new_context[{i}]")
                for i, e in enumerate(self.event.new_context)
                if "ref" not in e
            ]
            plain = [message_plain_text(m) for m in msgs]
            return TextIndex([FORMS[form](t) for t in plain] if form != "plain" else plain, plain)

        return self.memo(("fresh", form), build)

    def visible_has(
        self, needle: str, form: str = "plain", verify: Verify | None = None, key: Any = None
    ) -> bool:
        """Is ``needle`` in the post-compaction context's ``form`` text (within one message)?

        Same answer as searching :meth:`visible_text` (or its folded, normalized or lower-cased
        form), but each kept message is searched once per session, not once per event and arm."""
        if self.fresh_index(form).any(needle, verify):
            return True
        kept, masked = self.kept_positions()
        if kept and not self.view.hits(needle, form, verify, key).isdisjoint(kept):
            return True
        return bool(masked) and not self.view.hits(needle, form, verify, key, masked=True).isdisjoint(masked)

    def kept_ids(self) -> set[str]:
        """Recorded messages kept verbatim in the new context."""
        return self.memo("kept_ids", lambda: {e["ref"] for e in self.event.new_context if "ref" in e})

    def message_texts(self) -> list[str]:
        """Each context message as the model reads it (cached per recorded message)."""
        return self.memo("texts", lambda: self._form_texts("plain"))

    def _form_texts(self, form: str) -> list[str]:
        fresh = iter(self.fresh_index(form).texts)
        view = self.view
        n = len(view.session.messages)
        # the session's lists looked up once per event, not once per message (~800 a context)
        texts = view.form_texts(form)
        masked = (
            view.form_texts(form, True) if any(p is not None and p >= n for p in self.positions()) else []
        )
        return [next(fresh) if p is None else texts[p] if p < n else masked[p - n] for p in self.positions()]

    def visible_text(self) -> str:
        """Everything the model sees after the compaction: summary, carried texts and kept tail."""
        return self.memo("visible", lambda: "\n\n".join(self.message_texts()))

    def visible_folded(self) -> str:
        """The visible text with whitespace runs folded (a line re-wrapped still matches)."""
        return self.memo("folded", lambda: "\n".join(self._form_texts("folded")))

    def visible_normalized(self) -> str:
        """The visible text with case, whitespace and punctuation folded."""
        return self.memo("normalized", lambda: "\n".join(self._form_texts("norm")))


@dataclass(frozen=True)
class ProbeValue:
    """A metric value from a probe; ``value`` None with ``error`` set when it could not be scored.

    ``session_level`` values describe the whole (session, arm) and are written with
    ``event = round = -1`` (docs/contracts.md).
    """

    metric: str
    value: float | None
    error: str | None = None
    session_level: bool = False


Probe = Callable[..., list[ProbeValue]]
PROBES: Registry[Probe] = Registry(
    "probe",
    {
        "bank": "evalkit.score.banks:bank",
        "cadence": "evalkit.score.cadence:cadence",
        "structure": "evalkit.score.form:structure",
        "identifiers": "evalkit.score.identifiers:identifiers",
        "constraints_kept": "evalkit.score.intent:constraints_kept",
        "files_known": "evalkit.score.intent:files_known",
        "over_limit": "evalkit.score.invariants:over_limit",
        "lost_chars": "evalkit.score.invariants:lost_chars",
        "tool_pairs_valid": "evalkit.score.invariants:tool_pairs_valid",
        "carry_once": "evalkit.score.invariants:carry_once",
        "judge": "evalkit.score.judge:judge",
        "summary_size": "evalkit.score.size:summary_size",
        "compression": "evalkit.score.size:compression",
        "growth": "evalkit.score.size:growth",
        "redundant": "evalkit.score.size:redundant",
        "tally_present": "evalkit.score.teststate:tally_present",
        "failures_known": "evalkit.score.teststate:failures_known",
    },
)


def probe(
    name: str,
    description: str,
    metrics: dict[str, str],
    catches: str,
    needs_summary: bool = True,
    **info: Any,
):
    """Register a probe.

    ``metrics`` maps each metric it emits to its direction ("higher"/"lower" is better, or "info"
    for a descriptive covariate). With ``needs_summary`` the scorer turns the probe's event-level
    values into error rows (NaN + the summarizer's error) on events whose summary failed: a failed
    compaction has no summary to score, and must never count as a zero or as a success.
    """
    bad = {m: d for m, d in metrics.items() if d not in DIRECTIONS}
    if bad:
        raise ValueError(f"probe {name!r}: unknown direction(s) {bad} (use {DIRECTIONS})")

    def deco(fn: Probe) -> Probe:
        params = {
            p.name: p.default
            for p in list(inspect.signature(fn).parameters.values())[1:]
            if p.default is not inspect.Parameter.empty
        }
        PROBES.add(
            name,
            fn,
            description,
            metrics=metrics,
            catches=catches,
            needs_summary=needs_summary,
            params=params,
            doc=inspect.getdoc(fn) or "",
            **info,
        )
        return fn

    return deco


def model_client(inp: ProbeInput):
    """The run's model client for a model-judged probe, made once per event view and shared by
    every probe that reads it (the judge, the recovery arm's query)."""
    from evalkit.contracts.config import ModelConfig
    from evalkit.models import make_client

    extras = inp.view.extras
    if "client" not in extras:
        ctx = extras.get("ctx")
        extras["client"] = make_client(
            ctx.model if ctx else ModelConfig(), (ctx.run_dir or None) if ctx else None
        )
    return extras["client"]
