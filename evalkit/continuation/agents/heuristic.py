"""The ``heuristic`` agent: an offline, deterministic proxy for information availability.

It is not a model and its numbers are not model behaviour. It answers one question per
compaction: given what the compacted context still shows, which of the recorded next steps
would an agent have to repeat? It has its own notion of "known" and "stale", deliberately not
the continuation metrics' (``refail_N`` asks whether a file the failure names changed; this
agent, like a cautious developer, treats any edit as making an earlier outcome stale), and it
shares no code with the ground truth or the probes (``tests/models/test_standin_independence.py``). Rules:

1. **Lost failures are retried.** For every command whose latest run before the compaction point
   failed, with no edit recorded since, and whose failure the context does not show, the agent
   first runs that command again, oldest failure first.
2. **The recorded future is followed** call by call (the recording is what an agent that knew
   everything did next), except:
3. **A step whose outcome the context already shows is skipped**: a command, read or identical
   edit the recording already did before the point, with no edit since (recorded before the
   point or made by the agent), when the context shows that earlier outcome.

A context *shows* an outcome (:func:`knows`) when it keeps the message holding it verbatim and
unmasked, or when one of the closing lines of the output (where tools state their outcome)
appears in the visible text; a read when the whole file content is visible; an edit when its
call is. It stops when the plan is exhausted (``stopped``) or after ``max_calls`` calls.
"""

from __future__ import annotations

from evalkit.common.plaintext import block_plain_text
from evalkit.common.toolcalls import Op
from evalkit.continuation.agents import AGENTS, ContinuationInput, Step, Transcript
from evalkit.continuation.environment import ReplayEnvironment
from evalkit.continuation.recording import Action, SessionRecord
from evalkit.contracts.config import ContinuationConfig, ModelConfig
from evalkit.contracts.session import ToolCall

LABEL = "heuristic (proxy for information availability: not a model)"


def _prior(rec: SessionRecord, op: Op, at: int) -> Action | None:
    """The recorded action before the point that this step would repeat, if any."""
    if op.kind == "shell":
        return rec.latest_run(op.command or "", at)
    if op.kind == "read":
        return rec.last_read(op.reads[0], at)
    return rec.identical_before(op, at)


CLOSING_LINES = 3  # the lines at the end of an output that state its outcome
MIN_LINE_CHARS = 12  # shorter lines ("ok", "done") say too little to recognise an output by


def _fold(text: str) -> str:
    return " ".join(text.split())


def closing_lines(output: str) -> list[str]:
    """The last few lines of an output worth recognising it by, folded."""
    lines = [_fold(ln.strip("=-_* ")) for ln in output.splitlines()]
    return [ln for ln in lines if len(ln) >= MIN_LINE_CHARS][-CLOSING_LINES:]


def knows(inp: ContinuationInput, action: Action) -> bool:
    """Whether the context shows this recorded action's outcome (the agent's own test)."""
    op = action.op
    outcome = action.call_message if op.kind in ("modify", "other") else action.result_message
    if outcome is not None and outcome in inp.kept_ids:
        return True
    visible = inp.visible_folded()
    if op.kind in ("modify", "other"):
        return _fold(block_plain_text(action.call)) in visible
    output = action.result.output if action.result else ""
    if op.kind == "read":
        return bool(output.strip()) and _fold(output) in visible
    return any(line in visible for line in closing_lines(output))


def _stale(rec: SessionRecord, prior: Action, op: Op, at: int, touched_any: bool) -> bool:
    """Whether an edit since ``prior`` (recorded, or the agent's own) makes its outcome stale."""
    if op.kind == "modify":
        return False  # an identical edit is a repeat whatever happened in between
    if op.kind == "read":
        path = op.reads[0]
        return touched_any or rec.modified_between(prior.index, at, path)
    return touched_any or rec.modified_between(prior.index, at)


def plan(inp: ContinuationInput) -> list[tuple[ToolCall, Op]]:
    """The calls the heuristic would make, in order (possibly more than ``max_calls``)."""
    rec, at = inp.record, inp.at
    calls: list[tuple[ToolCall, Op]] = []
    for k, failure in enumerate(rec.open_failures(at)):
        if not rec.modified_between(failure.index, at) and not knows(inp, failure):
            calls.append((ToolCall(f"heuristic-retry-{k}", failure.call.name, failure.call.args), failure.op))
    touched_any = False
    for a in rec.after(at):
        if len(calls) > inp.max_calls:
            break
        prior = _prior(rec, a.op, at)
        if prior is not None and not _stale(rec, prior, a.op, at, touched_any) and knows(inp, prior):
            continue
        calls.append((a.call, a.op))
        if a.op.kind == "modify" or a.op.modifies:
            touched_any = True
    return calls


def heuristic_agent(inp: ContinuationInput, env: ReplayEnvironment) -> Transcript:
    """Run the plan in the environment, up to ``max_calls`` calls."""
    calls = plan(inp)
    steps = [Step(call, op, env.answer(call, op)) for call, op in calls[: inp.max_calls]]
    return Transcript(steps, stopped=len(calls) <= inp.max_calls)


@AGENTS.register(
    "heuristic",
    "offline deterministic proxy: follows the recorded future, skips steps the context shows, "
    "retries failures the context lost (measures information availability, not a model)",
    proxy=True,
    label=LABEL,
)
def make_heuristic(settings: ContinuationConfig, model: ModelConfig, run_dir=None, client=None):
    return heuristic_agent
