"""The replay environment: answers an agent's tool calls from the recorded session.

Nothing runs. A shell command that matches a recorded one after normalization (whitespace,
quoting, ``cd DIR &&`` prefixes; :func:`evalkit.common.toolcalls.normalize_command`) gets the
recorded output and exit status: the latest recorded run at or before the compaction point,
else the first after it. A file read gets the file's content where the recording shows it (a
read result or a whole-file write, by the same rule). An edit or write is recorded and
acknowledged. A call identical to a recorded call of any other tool gets that call's result.
Everything else gets an explicit "not available in replay" result, and the environment logs
which calls it could and could not answer, so wandering off the recording is visible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evalkit.common.toolcalls import Op, classify, result_failed
from evalkit.continuation.recording import SessionRecord, pick
from evalkit.contracts.session import ToolCall

UNAVAILABLE = "[not available in replay: the recording holds no result for this call]"


@dataclass(frozen=True, slots=True)
class Answer:
    """The environment's answer to one call.

    ``source`` says how it was answered (``command``, ``file``, ``edit``, ``identical``) or
    ``unavailable``; ``failed`` is True only for a recorded failure (an unanswerable call is not
    a failure of the command, it is a gap in the recording). ``recorded_index`` is the message
    index of the recorded result used, when there is one.
    """

    output: str
    source: str
    failed: bool = False
    exit_code: int | None = None
    recorded_index: int | None = None

    @property
    def answered(self) -> bool:
        return self.source != "unavailable"

    @property
    def is_error(self) -> bool:
        """What the agent is told: an error for failures and for unanswerable calls."""
        return self.failed or not self.answered


@dataclass
class ReplayEnvironment:
    """Answers tool calls for one continuation starting at message index ``at``."""

    record: SessionRecord
    at: int
    log: list[tuple[str, str]] = field(default_factory=list)  # (tool name, answer source)

    def answer(self, call: ToolCall, op: Op | None = None) -> Answer:
        """Answer one call (``op`` is its :func:`classify` result when the caller already has it)."""
        op = op or classify(call)
        ans = self._answer(call, op)
        self.log.append((call.name, ans.source))
        return ans

    def _answer(self, call: ToolCall, op: Op) -> Answer:
        rec = self.record
        if op.kind == "shell":
            run = pick(rec.by_command.get(op.command or "", ()), self.at)
            if run is not None and run.result is not None:
                r = run.result
                return Answer(r.output, "command", result_failed(r), r.exit_code, run.index)
            if op.reads and not op.modifies:  # `cat FILE` never recorded as such: the file's content
                return self._file(op.reads[0])
            if op.modifies:
                return self._edit(op)
            return Answer(UNAVAILABLE, "unavailable")
        if op.kind == "read":
            return self._file(op.reads[0])
        if op.kind == "modify":
            return self._edit(op)
        same = pick(rec.by_signature.get(op.signature, ()), self.at)
        if same is not None and same.result is not None:
            r = same.result
            return Answer(r.output, "identical", result_failed(r), r.exit_code, same.index)
        return Answer(UNAVAILABLE, "unavailable")

    def _file(self, path: str) -> Answer:
        view = pick(self.record.files.get(path, ()), self.at)
        if view is None:
            return Answer(UNAVAILABLE, "unavailable")
        return Answer(view.content, "file", recorded_index=view.index)

    def _edit(self, op: Op) -> Answer:
        target = ", ".join(op.modifies) or "the file"
        return Answer(f"Edit to {target} recorded (replay: acknowledged, not applied).", "edit")

    @property
    def unanswered(self) -> int:
        return sum(1 for _, src in self.log if src == "unavailable")

    def unanswerable_share(self) -> float | None:
        """Share of calls the recording could not answer; None when no call was made."""
        return self.unanswered / len(self.log) if self.log else None
