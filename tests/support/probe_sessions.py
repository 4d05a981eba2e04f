"""Constructed sessions and events for probe tests: the right answer is known by construction."""

from __future__ import annotations

from evalkit.contracts.event import Event, Invariants
from evalkit.contracts.session import Message, Session, Source, Text, ToolCall, ToolResult, message_to_dict
from evalkit.facts import compute_facts
from evalkit.score import PROBES, ProbeInput, SessionView

SID = "t"


class Builder:
    """Append messages; ``tool`` adds an assistant call and its result."""

    def __init__(self):
        self.messages: list[Message] = [Message(f"{SID}:m000", "system", [Text("You are an agent.")])]
        self.calls = 0

    def add(self, role: str, *blocks) -> int:
        self.messages.append(Message(f"{SID}:m{len(self.messages):03d}", role, list(blocks)))
        return len(self.messages) - 1

    def user(self, text: str) -> int:
        return self.add("user", Text(text))

    def tool(self, name: str, args: dict, output: str, exit_code: int | None = 0) -> int:
        self.calls += 1
        cid = f"c{self.calls}"
        self.add("assistant", ToolCall(cid, name, args))
        return self.add("tool", ToolResult(cid, output, exit_code not in (0, None), exit_code))

    def session(self) -> Session:
        return Session(SID, Source("synthetic"), list(self.messages))


def event(
    s: Session,
    at: int,
    keep_from: int,
    summary: str,
    *,
    n: int = 0,
    carried: list[str] | None = None,
    extra: list[str] | None = None,
    request: dict | None = None,
    summary_error: str | None = None,
    first_kept_id: str | None = None,
    tokens: tuple[int, int] = (1000, 100),
    invariants: Invariants | None = None,
    meta: dict | None = None,
) -> Event:
    """An event that removed messages 1..keep_from-1 and kept keep_from..at verbatim, with the
    summary (and ``extra`` made texts, e.g. a carry block) spliced in after the system message."""
    made = [Message(f"evalkit:r{n + 1}:summary", "user", [Text(summary)])]
    made += [Message(f"evalkit:r{n + 1}:x{i}", "user", [Text(t)]) for i, t in enumerate(extra or [])]
    ctx = [{"ref": s.messages[0].id}] + [{"message": message_to_dict(m)} for m in made]
    ctx += [{"ref": m.id} for m in s.messages[keep_from : at + 1]]
    return Event(
        arm="a",
        session=s.id,
        event=n,
        round=n + 1,
        trigger="tokens",
        at_message=at,
        tokens_before=tokens[0],
        tokens_after=tokens[1],
        window=200_000,
        first_kept_id=first_kept_id or (s.messages[keep_from].id if keep_from <= at else None),
        removed_ids=[m.id for m in s.messages[1:keep_from]],
        summary=summary,
        summary_error=summary_error,
        request=request,
        carried=list(carried or []),
        new_context=ctx,
        invariants=invariants or Invariants(),
        meta=meta or {},
    )


def run_probe(name: str, ev: Event, s: Session, previous=(), later=(), **params) -> dict[str, float | None]:
    """The probe's values by metric (session-level ones suffixed with '@session')."""
    inp = ProbeInput(ev, SessionView(s, compute_facts(s)), list(previous), list(later))
    out = {}
    for v in PROBES.get(name)(inp, **params):
        out[v.metric + ("@session" if v.session_level else "")] = v.value
    return out
