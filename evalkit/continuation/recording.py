"""What the recording shows: every tool call of a session with its result, indexed for continuation.

A continuation starts at a compaction point (the index of the last recorded message in view) and
asks, again and again, "what did the recording show for this command / this file, before or
after the point?". :class:`SessionRecord` answers from indexes built in one pass, so the replay
environment, the heuristic agent, the metrics and the observational baseline share one view of
the recording. Which calls run commands, read files or modify them is decided by
:mod:`evalkit.common.toolcalls` (the one place that knows tool names). Nothing here comes from the
ground truth (:mod:`evalkit.facts`): the heuristic agent reads the recording through this module.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from evalkit.common.toolcalls import Op, classify, norm_path, result_failed

# Op, classify, norm_path and result_failed live in common.toolcalls (the corpus comparison uses
# them too, and must not import the continuation stage); re-exported here.
__all__ = [
    "Action",
    "FileView",
    "Op",
    "SessionRecord",
    "classify",
    "norm_path",
    "pick",
    "result_failed",
    "same_file",
    "touches",
]
from evalkit.contracts.session import Session, ToolCall, ToolResult


@dataclass(frozen=True, slots=True)
class Action:
    """One recorded tool call and its result. ``index`` is the result's message index."""

    index: int
    call: ToolCall
    op: Op
    result: ToolResult | None
    call_message: str
    result_message: str | None

    @property
    def failed(self) -> bool:
        return result_failed(self.result)

    def named_files(self) -> tuple[str, ...]:
        """Source files the result's output names (where a failure says the problem is)."""
        return _named_files(self.result.output if self.result else "")


_FILE = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|ts|tsx|js|jsx|rs|go|rb|php|java|kt|c|h|cc|cpp|hpp|rst|md|toml|ya?ml|json|cfg|ini))\b"
)


@lru_cache(maxsize=1 << 14)
def _named_files(output: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.lstrip("./") for m in _FILE.findall(output[-20_000:])))


def same_file(a: str, b: str) -> bool:
    """Two spellings of one path (``./src/a.py``, ``/repo/src/a.py``, ``src/a.py``)."""
    a, b = a.lstrip("./"), b.lstrip("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def touches(failure: Action, modified: Iterable[str]) -> bool:
    """Whether modifying ``modified`` can change ``failure``'s outcome: a file it names was
    modified, or, when it names none, anything was."""
    named = failure.named_files()
    mods = list(modified)
    if not named:
        return bool(mods)
    return any(same_file(m, n) for m in mods for n in named)


@dataclass(frozen=True, slots=True)
class FileView:
    """The content of a file as the recording shows it at ``index`` (a read result or a write)."""

    index: int
    content: str
    message_id: str


@dataclass
class SessionRecord:
    """Indexes over one session's tool traffic, built once and shared by every continuation of it."""

    session: Session
    actions: list[Action] = field(default_factory=list)
    by_command: dict[str, list[Action]] = field(default_factory=dict)
    by_signature: dict[str, list[Action]] = field(default_factory=dict)
    files: dict[str, list[FileView]] = field(default_factory=dict)
    reads: dict[str, list[Action]] = field(default_factory=dict)  # path -> actions that read it
    mods: dict[str, list[int]] = field(default_factory=dict)  # path -> indices of modifications
    mod_indices: list[int] = field(default_factory=list)  # every modification, any path
    _positions: list[int] = field(default_factory=list)
    _open: dict[int, list[Action]] = field(default_factory=dict)

    @classmethod
    def build(cls, session: Session) -> SessionRecord:
        rec = cls(session)
        pending: dict[str, tuple[int, ToolCall, str]] = {}
        order: list[str] = []
        results: dict[str, tuple[int, ToolResult, str]] = {}
        for i, msg in enumerate(session.messages):
            for call in msg.tool_calls():
                pending[call.id] = (i, call, msg.id)
                order.append(call.id)
            for res in msg.tool_results():
                if res.call_id in pending and res.call_id not in results:
                    results[res.call_id] = (i, res, msg.id)
        for cid in order:
            ci, call, cmid = pending[cid]
            ri, res, rmid = results.get(cid, (ci, None, None))
            rec._add(Action(ri, call, classify(call), res, cmid, rmid))
        rec.actions.sort(key=lambda a: a.index)  # stable: calls of one turn keep their order
        rec._positions = [a.index for a in rec.actions]
        rec.mod_indices.sort()
        return rec

    def _add(self, a: Action) -> None:
        self.actions.append(a)
        op = a.op
        if op.command is not None:
            self.by_command.setdefault(op.command, []).append(a)
        self.by_signature.setdefault(op.signature, []).append(a)
        ok = a.result is not None and not a.failed
        for p in op.reads:
            self.reads.setdefault(p, []).append(a)
            if ok and op.kind in ("read", "shell") and a.result_message:
                self.files.setdefault(p, []).append(FileView(a.index, a.result.output, a.result_message))
        for p in op.modifies:
            self.mods.setdefault(p, []).append(a.index)
            self.mod_indices.append(a.index)
            content = a.call.args.get("content")
            if op.kind == "modify" and isinstance(content, str):
                # A whole-file write shows the file's content as well as a read does.
                self.files.setdefault(p, []).append(FileView(a.index, content, a.call_message))

    # ------------------------------------------------------------------ queries at a point

    def before(self, at: int) -> list[Action]:
        """Actions whose result was in view at the compaction point ``at`` (index <= at)."""
        return self.actions[: bisect.bisect_right(self._positions, at)]

    def after(self, at: int) -> list[Action]:
        """The recorded future: actions after the compaction point, in order."""
        return self.actions[bisect.bisect_right(self._positions, at) :]

    def open_failures(self, at: int) -> list[Action]:
        """Commands whose latest run at or before ``at`` failed, oldest first."""
        if at not in self._open:
            latest: dict[str, Action] = {}
            for a in self.before(at):
                if a.op.command is not None and a.result is not None:
                    latest[a.op.command] = a
            self._open[at] = sorted((a for a in latest.values() if a.failed), key=lambda a: a.index)
        return self._open[at]

    def latest_run(self, command: str, at: int) -> Action | None:
        """The latest recorded run of a normalized command at or before ``at``."""
        return _latest(self.by_command.get(command, ()), at)

    def changed_for(self, failure: Action, at: int) -> bool:
        """Whether the recording changed, between ``failure`` and ``at``, something that can
        change its outcome (see :func:`touches`)."""
        if not self.modified_between(failure.index, at):
            return False
        named = failure.named_files()
        if not named:
            return True
        return any(
            same_file(p, n) and self.modified_between(failure.index, at, p) for p in self.mods for n in named
        )

    def failure_changed(self, failure: Action, at: int, touched_any: bool, touched: set[str]) -> bool:
        """Whether a failed run's outcome may differ for an agent continuing from ``at``: the
        recording changed something it depends on before the point (:meth:`changed_for`), or the
        agent has modified files since (``touched``; ``touched_any`` covers edits of unknown path)."""
        return (touches(failure, touched) if touched else touched_any) or self.changed_for(failure, at)

    def modified_between(self, lo: int, hi: int, path: str | None = None) -> bool:
        """Whether the recording modifies ``path`` (any file when None) at an index in (lo, hi]."""
        idx = self.mod_indices if path is None else self.mods.get(path, ())
        k = bisect.bisect_right(idx, lo)
        return k < len(idx) and idx[k] <= hi

    def last_read(self, path: str, at: int) -> Action | None:
        """The latest recorded read of ``path`` at or before ``at``."""
        return _latest(self.reads.get(path, ()), at)

    def identical_before(self, op: Op, at: int) -> Action | None:
        """The latest recorded call identical to ``op`` at or before ``at``."""
        return _latest(self.by_signature.get(op.signature, ()), at)


def _latest(items, at: int):
    """The last item with ``index <= at`` (items are in index order)."""
    k = bisect.bisect_right(items, at, key=_index)
    return items[k - 1] if k else None


def _index(item) -> int:
    return item.index


def pick(items, at: int):
    """The replay rule: the latest item at or before ``at``, else the first after it, else None."""
    return _latest(items, at) or (items[0] if items else None)
