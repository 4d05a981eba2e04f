"""The compaction event: what replay writes and every scorer reads.

One event per compaction per (session, arm). Messages kept verbatim are stored by reference
(their id in the canonical session) and messages the compactor made (the summary message,
carried blocks) are stored in full, so events stay small while the full model-visible context
can always be rebuilt with :func:`resolve_context`. Events are streamed as JSONL, one file per
arm: ``events/<arm>.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from evalkit.contracts.session import Message, ToolResult, message_from_dict, message_to_dict

EVENT_SCHEMA = "evalkit.event/1"


@dataclass
class Invariants:
    """Checks replay runs on every compaction (see the replay issue and seeds 003/004)."""

    tool_pairs_valid: bool = True
    lost_chars: int = 0  # chars that left the view unseen by any summarizer, not kept, not carried
    over_limit: bool = False  # context after compaction above the window: the session is dead


@dataclass
class Event:
    """One compaction of one session under one arm."""

    arm: str
    session: str
    event: int  # 0-based index of the compaction within (session, arm)
    round: int  # 1-based compaction round
    trigger: str  # tokens | messages | recorded
    at_message: int  # index of the last recorded message in view when compaction fired
    tokens_before: int
    tokens_after: int
    window: int
    first_kept_id: str | None
    removed_ids: list[str]  # recorded messages that left the view in this compaction
    summary: str
    summary_error: str | None = None  # the backend's error; the summary is then not a summary
    request_key: str | None = None  # model-call cache key of the summarizer request
    request: dict[str, Any] | None = None  # the exact summarizer request (messages, params)
    carried: list[str] = field(default_factory=list)  # texts carried verbatim into the new context
    new_context: list[dict[str, Any]] = field(default_factory=list)  # {"ref": id} or {"message": {...}}
    invariants: Invariants = field(default_factory=Invariants)
    backend: str = ""
    model: str = ""
    replicate: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    # Added by replay (defaults keep older event files readable):
    truncated_chars: int = 0  # chars of messages leaving the view that the arm's render policy cut on purpose
    source_chars: int = 0  # size of the rendered head handed to the summarizer (seed 003's source)
    summary_tokens: int = 0  # the summary's size under the run's tokenizer (seed 004: surface it)
    schema: str = EVENT_SCHEMA

    def to_json(self) -> str:
        # A shallow dict: asdict() deep-copies every nested value, which dominated replay time.
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["invariants"] = asdict(self.invariants)
        return json.dumps(d, ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict) -> Event:
        d = dict(d)
        d["invariants"] = Invariants(**d.get("invariants", {}))
        return cls(**d)


def context_entry(msg: Message, recorded: bool) -> dict[str, Any]:
    """A new-context entry: a reference for a recorded message, the message itself otherwise."""
    return {"ref": msg.id} if recorded else {"message": message_to_dict(msg)}


MASKED_OUTPUT = "[tool output omitted: {n} characters]"


def mask_outputs(msg: Message) -> Message:
    """A recorded message with every tool output replaced by a placeholder (observation masking).

    Events store such a copy as ``{"ref": id, "mask": "outputs"}`` rather than in full.
    """
    blocks = [
        replace(b, output=MASKED_OUTPUT.format(n=len(b.output))) if isinstance(b, ToolResult) else b
        for b in msg.blocks
    ]
    return Message(f"{msg.id}#masked", msg.role, blocks, {"evalkit_masked": msg.id})


def resolve_context(
    event: Event, by_id: dict[str, Message], masked: dict[str, Message] | None = None
) -> list[Message]:
    """The event's model-visible context as messages (references looked up in the session).

    ``masked``, when given, memoizes the masked copies by id: a masking arm keeps hundreds of them
    at every event, and they are the same at every event of the session."""
    out = []
    for i, entry in enumerate(event.new_context):
        if "ref" in entry:
            ref = entry["ref"]
            if entry.get("mask") != "outputs":
                out.append(by_id[ref])
            elif masked is None:
                out.append(mask_outputs(by_id[ref]))
            else:
                copy = masked.get(ref)
                if copy is None:
                    copy = masked[ref] = mask_outputs(by_id[ref])
                out.append(copy)
        else:
            out.append(message_from_dict(entry["message"], f"new_context[{i}]"))
    return out


_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def arm_filename(arm: str) -> str:
    """A file-name-safe form of an arm name: itself when safe (``head-tail+validate``), else
    the unsafe characters replaced and a short hash added (``external:python x.py``)."""
    if not _SAFE.search(arm) and arm not in (".", ".."):
        return arm
    return _SAFE.sub("_", arm)[:60] + "-" + hashlib.sha256(arm.encode()).hexdigest()[:8]


def events_path(run_dir: str | os.PathLike, arm: str) -> Path:
    """Where one arm's events live; readers should use this rather than build the name."""
    return Path(run_dir) / "events" / f"{arm_filename(arm)}.jsonl"


def read_events(path: str | os.PathLike) -> Iterator[Event]:
    """Stream events from one arm's JSONL file."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield Event.from_dict(json.loads(line))
