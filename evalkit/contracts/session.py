"""The canonical session: the one form every importer produces and every stage reads.

A session is an ordered list of messages; a message has a role and a list of blocks. Blocks are
small frozen dataclasses so that compactors can share them between contexts without copying.

The JSON form (one session per JSONL line) is versioned by ``SCHEMA``; ``session_from_dict``
validates outside input and raises :class:`RecordError` naming the field that is wrong, so the
reader in :mod:`evalkit.corpus` can report ``file:line: field: reason``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA = "evalkit.session/1"
ROLES = ("system", "user", "assistant", "tool")
Role = Literal["system", "user", "assistant", "tool"]


class RecordError(ValueError):
    """A record that does not fit the schema; ``field`` is a dotted path into the record."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text. ``synthetic`` marks text a harness injected (reminders, command wrappers)."""

    text: str
    synthetic: bool = False
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class Thinking:
    """Model reasoning shown in the transcript."""

    text: str
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation by the assistant; ``args`` is the decoded argument object."""

    id: str
    name: str
    args: dict[str, Any]
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The answer to one tool call. ``exit_code`` is None when the tool reports none."""

    call_id: str
    output: str
    is_error: bool = False
    exit_code: int | None = None
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction the recording harness performed at this point (not one evalkit made)."""

    summary: str
    tokens_before: int | None = None
    tokens_after: int | None = None
    trigger: str = "auto"
    type: Literal["compaction"] = "compaction"


Block = Text | Thinking | ToolCall | ToolResult | Compaction
BLOCK_TYPES: dict[str, type] = {
    "text": Text,
    "thinking": Thinking,
    "tool_call": ToolCall,
    "tool_result": ToolResult,
    "compaction": Compaction,
}


@dataclass(slots=True)
class Message:
    """One message. ``id`` is stable across re-imports so events can name the first kept message."""

    id: str
    role: Role
    blocks: list[Block]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The message's visible text blocks joined (tool traffic and thinking excluded)."""
        return "\n".join(b.text for b in self.blocks if isinstance(b, Text))

    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.blocks if isinstance(b, ToolCall)]

    def tool_results(self) -> list[ToolResult]:
        return [b for b in self.blocks if isinstance(b, ToolResult)]

    def is_genuine_user(self) -> bool:
        """A message the human typed: role user, with non-synthetic text, not a tool result."""
        if self.role != "user" or self.meta.get("synthetic"):
            return False
        return any(isinstance(b, Text) and not b.synthetic and b.text.strip() for b in self.blocks)


@dataclass(slots=True)
class Source:
    """Where a session came from: importer format, file path, and origin (repository, tool, seed)."""

    format: str
    path: str = ""
    origin: str = ""


@dataclass(slots=True)
class Session:
    """A recorded agent session in canonical form."""

    id: str
    source: Source
    messages: list[Message]
    meta: dict[str, Any] = field(default_factory=dict)
    schema: str = SCHEMA


# --------------------------------------------------------------------------- serialization


def block_to_dict(block: Block) -> dict[str, Any]:
    """JSON form of a block; defaults are omitted to keep corpora small."""
    if isinstance(block, Text):
        d: dict[str, Any] = {"type": "text", "text": block.text}
        if block.synthetic:
            d["synthetic"] = True
        return d
    if isinstance(block, Thinking):
        return {"type": "thinking", "text": block.text}
    if isinstance(block, ToolCall):
        return {"type": "tool_call", "id": block.id, "name": block.name, "args": block.args}
    if isinstance(block, ToolResult):
        d = {"type": "tool_result", "call_id": block.call_id, "output": block.output}
        if block.is_error:
            d["is_error"] = True
        if block.exit_code is not None:
            d["exit_code"] = block.exit_code
        return d
    if isinstance(block, Compaction):
        return {
            "type": "compaction",
            "summary": block.summary,
            "tokens_before": block.tokens_before,
            "tokens_after": block.tokens_after,
            "trigger": block.trigger,
        }
    raise TypeError(f"not a block: {block!r}")


def message_to_dict(msg: Message) -> dict[str, Any]:
    d: dict[str, Any] = {"id": msg.id, "role": msg.role, "blocks": [block_to_dict(b) for b in msg.blocks]}
    if msg.meta:
        d["meta"] = msg.meta
    return d


def session_to_dict(s: Session) -> dict[str, Any]:
    return {
        "schema": s.schema,
        "id": s.id,
        "source": {"format": s.source.format, "path": s.source.path, "origin": s.source.origin},
        "meta": s.meta,
        "messages": [message_to_dict(m) for m in s.messages],
    }


def session_to_json(s: Session) -> str:
    """One JSONL line. ``ensure_ascii`` keeps U+2028 and friends escaped, so lines split on ``\\n`` only."""
    return json.dumps(session_to_dict(s), ensure_ascii=True, separators=(",", ":"))


# --------------------------------------------------------------------------- validation


def _req(d: dict, key: str, typ: type | tuple[type, ...], path: str) -> Any:
    if key not in d:
        raise RecordError(f"{path}.{key}" if path else key, "missing")
    v = d[key]
    # bool is an int in Python; a count or exit code given as true/false is a type error here.
    if isinstance(v, bool) and typ in (int, (int, type(None))):
        raise RecordError(f"{path}.{key}" if path else key, f"expected integer, got {v!r}")
    if not isinstance(v, typ):
        want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise RecordError(f"{path}.{key}" if path else key, f"expected {want}, got {type(v).__name__}")
    return v


def _opt(d: dict, key: str, typ: type | tuple[type, ...], path: str, default: Any) -> Any:
    if d.get(key) is None:
        return default
    return _req(d, key, typ, path)


def block_from_dict(d: Any, path: str) -> Block:
    if not isinstance(d, dict):
        raise RecordError(path, f"expected object, got {type(d).__name__}")
    kind = _req(d, "type", str, path)
    if kind == "text":
        return Text(_req(d, "text", str, path), bool(_opt(d, "synthetic", bool, path, False)))
    if kind == "thinking":
        return Thinking(_req(d, "text", str, path))
    if kind == "tool_call":
        return ToolCall(_req(d, "id", str, path), _req(d, "name", str, path), _opt(d, "args", dict, path, {}))
    if kind == "tool_result":
        return ToolResult(
            _req(d, "call_id", str, path),
            _req(d, "output", str, path),
            bool(_opt(d, "is_error", bool, path, False)),
            _opt(d, "exit_code", int, path, None),
        )
    if kind == "compaction":
        return Compaction(
            _req(d, "summary", str, path),
            _opt(d, "tokens_before", int, path, None),
            _opt(d, "tokens_after", int, path, None),
            _opt(d, "trigger", str, path, "auto"),
        )
    raise RecordError(
        f"{path}.type", f"unknown block type {kind!r} (expected one of {', '.join(BLOCK_TYPES)})"
    )


def message_from_dict(d: Any, path: str) -> Message:
    if not isinstance(d, dict):
        raise RecordError(path, f"expected object, got {type(d).__name__}")
    role = _req(d, "role", str, path)
    if role not in ROLES:
        raise RecordError(f"{path}.role", f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    blocks = _req(d, "blocks", list, path)
    return Message(
        id=_req(d, "id", str, path),
        role=role,  # type: ignore[arg-type]
        blocks=[block_from_dict(b, f"{path}.blocks[{i}]") for i, b in enumerate(blocks)],
        meta=_opt(d, "meta", dict, path, {}),
    )


def session_from_dict(d: Any) -> Session:
    """Validate and build a session; raises :class:`RecordError` on the first bad field."""
    if not isinstance(d, dict):
        raise RecordError("(record)", f"expected a JSON object, got {type(d).__name__}")
    schema = _opt(d, "schema", str, "", SCHEMA)
    if schema.split("/")[0] != SCHEMA.split("/")[0]:
        raise RecordError("schema", f"unsupported schema {schema!r} (expected {SCHEMA})")
    src = _req(d, "source", dict, "")
    msgs = _req(d, "messages", list, "")
    return Session(
        id=_req(d, "id", str, ""),
        source=Source(
            format=_req(src, "format", str, "source"),
            path=_opt(src, "path", str, "source", ""),
            origin=_opt(src, "origin", str, "source", ""),
        ),
        messages=[message_from_dict(m, f"messages[{i}]") for i, m in enumerate(msgs)],
        meta=_opt(d, "meta", dict, "", {}),
        schema=schema,
    )


# --------------------------------------------------------------------------- invariants


@dataclass(frozen=True, slots=True)
class PairProblem:
    """One broken tool pairing: which message, which call id, and what is wrong."""

    index: int
    call_id: str
    problem: str  # "orphan_result" | "unanswered_call" | "duplicate_result"


def pair_ids(msg: Message) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ids of ``msg``'s tool calls and of the calls its tool results answer."""
    return tuple(c.id for c in msg.tool_calls()), tuple(r.call_id for r in msg.tool_results())


def tool_pair_problems(
    messages: list[Message], ids: Callable[[Message], tuple[Sequence[str], Sequence[str]]] = pair_ids
) -> list[PairProblem]:
    """Every tool call must be answered by exactly one result before the next assistant turn.

    Providers reject a request with a result whose call is not in view (or a call left without its
    result) with a 400, so a compactor that breaks a pair kills the session. ``ids`` gives each
    message's :func:`pair_ids` (replay passes a memo: it checks every event's whole context).
    """
    problems: list[PairProblem] = []
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, msg in enumerate(messages):
        calls, results = ids(msg)
        if msg.role == "assistant":
            for cid, at in open_calls.items():
                problems.append(PairProblem(at, cid, "unanswered_call"))
            open_calls = {}
            answered = set()
            for cid in calls:
                open_calls[cid] = i
        for rid in results:
            if rid in open_calls:
                del open_calls[rid]
                answered.add(rid)
            elif rid in answered:
                problems.append(PairProblem(i, rid, "duplicate_result"))
            else:
                problems.append(PairProblem(i, rid, "orphan_result"))
    for cid, at in open_calls.items():
        problems.append(PairProblem(at, cid, "unanswered_call"))
    return problems


def reused_call_ids(messages: list[Message]) -> int:
    """Tool calls whose id an earlier assistant turn already used (``call_1`` every turn).

    Valid (results pair within their turn), but worth a warning: anything that matches ids
    across the whole session would pair them wrongly."""
    seen: set[str] = set()
    reused = 0
    for msg in messages:
        if msg.role == "assistant":
            ids = [c.id for c in msg.tool_calls()]
            reused += sum(1 for i in ids if i in seen)
            seen.update(ids)
    return reused


def tool_pairs_valid(
    messages: list[Message], ids: Callable[[Message], tuple[Sequence[str], Sequence[str]]] = pair_ids
) -> bool:
    """True when :func:`tool_pair_problems` finds nothing."""
    return not tool_pair_problems(messages, ids)


def block_chars(block: Block) -> int:
    """Characters a block puts in front of a model (the unit of the chars/4 token estimate)."""
    if isinstance(block, Text | Thinking):
        return len(block.text)
    if isinstance(block, ToolCall):
        return len(block.name) + len(json.dumps(block.args, ensure_ascii=False, sort_keys=True))
    if isinstance(block, ToolResult):
        return len(block.output)
    if isinstance(block, Compaction):
        return len(block.summary)
    raise TypeError(f"not a block: {block!r}")


def message_chars(msg: Message) -> int:
    return sum(block_chars(b) for b in msg.blocks)
