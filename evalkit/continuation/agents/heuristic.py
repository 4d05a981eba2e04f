"""The ``heuristic`` agent: an offline, deterministic proxy for information availability.

It is not a model and its numbers are not model behaviour. It answers one question per
compaction: given what the compacted context still shows, which of the recorded next steps
would an agent have to repeat? Rules, applied in this order:

1. **Lost failures are retried.** For every command whose latest run before the compaction point
   failed (an open failure), with no change since to a file its output names (or to any file,
   when it names none; so knowing the failure would tell the agent the outcome), and whose
   failure the context does not show (neither the recorded result kept verbatim nor its error
   line anywhere in view), the agent first runs that command again,
   oldest failure first. A context that kept the failure costs nothing here; a failure followed
   by edits is not retried by this rule, since its outcome is unknown with or without the
   information (the recorded future decides whether it is re-run).
2. **The recorded future is followed** call by call (the recording is what an agent that knew
   everything did next), except:
3. **A step whose outcome the context already shows is skipped**: a command, read or identical
   edit/call that the recording already did before the point, with nothing changed since (for a
   failed command: no file its output names modified since, the test ``refail_N`` uses, so the
   agent skips exactly the re-runs the metric would count; for another command: no file modified
   since; for a read: that file not modified since; an edit: always), when the context shows that
   earlier outcome (:meth:`ContinuationInput.shows`).

It stops when the plan is exhausted (``stopped``) or after ``max_calls`` calls. The rules use
the same "shows" test for every arm, so an arm can only lower refail/redo by keeping the
information in view: every recorded re-run that ``refail_N`` would count is skipped when the
context shows its failure, so a refail always means information the context lost.
"""

from __future__ import annotations

from evalkit.continuation.agents import AGENTS, ContinuationInput, Step, Transcript
from evalkit.continuation.environment import ReplayEnvironment
from evalkit.continuation.recording import Action, Op, SessionRecord
from evalkit.session import ToolCall

LABEL = "heuristic (proxy for information availability: not a model)"


def _prior(rec: SessionRecord, op: Op, at: int) -> Action | None:
    """The recorded action before the point that this step would repeat, if any."""
    if op.kind == "shell":
        return rec.latest_run(op.command or "", at)
    if op.kind == "read":
        return rec.last_read(op.reads[0], at)
    return rec.identical_before(op, at)


def _changed_since(
    rec: SessionRecord, prior: Action, op: Op, at: int, touched_any: bool, touched: set[str]
) -> bool:
    """Whether the workspace changed since ``prior`` in a way that makes its outcome stale."""
    if op.kind == "modify":
        return False  # an identical edit is a repeat whatever happened in between
    if op.kind == "read":
        path = op.reads[0]
        return path in touched or rec.modified_between(prior.index, at, path)
    if prior.failed:
        # The refail metric's own test: a failure stays known until something it names changes.
        return rec.failure_changed(prior, at, touched_any, touched)
    return touched_any or rec.modified_between(prior.index, at)


def plan(inp: ContinuationInput) -> list[tuple[ToolCall, Op]]:
    """The calls the heuristic would make, in order (possibly more than ``max_calls``)."""
    rec, at = inp.record, inp.at
    calls: list[tuple[ToolCall, Op]] = []
    for k, failure in enumerate(rec.open_failures(at)):
        if not rec.changed_for(failure, at) and not inp.shows(failure):
            calls.append((ToolCall(f"heuristic-retry-{k}", failure.call.name, failure.call.args), failure.op))
    touched_any, touched = False, set()
    for a in rec.after(at):
        if len(calls) > inp.max_calls:
            break
        prior = _prior(rec, a.op, at)
        if (
            prior is not None
            and not _changed_since(rec, prior, a.op, at, touched_any, touched)
            and inp.shows(prior)
        ):
            continue
        calls.append((a.call, a.op))
        if a.op.kind == "modify" or a.op.modifies:
            touched_any = True
            touched.update(a.op.modifies)
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
def make_heuristic(settings: dict, run_dir=None, client=None):
    return heuristic_agent
