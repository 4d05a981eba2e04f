"""``external:CMD``: a third-party compactor run as a command, one process per compaction.

The protocol (``docs/external-candidates.md``): one JSON object on stdin (the context, the
budget, the previous summary), one JSON object on stdout (the new context). A crash, a timeout
or output that is not the expected JSON raises :class:`ExternalError` naming the command, the
session, the round and what was wrong; replay records it as the event's ``summary_error``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import replace
from typing import Any

from evalkit.contracts.session import Message, RecordError, message_chars, message_from_dict, message_to_dict
from evalkit.replay.compactor import Policy
from evalkit.replay.job import SUMMARY_META, Job, Outcome

PROTOCOL = "evalkit.external/1"


class CompactorError(RuntimeError):
    """A compactor that could not produce a result; replay records it on the event."""


class ExternalError(CompactorError):
    pass


def external_policy(cmd: str) -> Policy:
    """The policy of ``external:CMD``: the command replaces the whole pipeline."""
    if not cmd.strip():
        raise ValueError("external: needs a command, e.g. external:python my_compactor.py")
    argv = shlex.split(cmd)
    return replace(Policy(), name=f"external:{cmd}", compact=lambda job, pol: run_external(argv, job))


def request_payload(job: Job) -> dict[str, Any]:
    previous = next((m.meta[SUMMARY_META] for m in reversed(job.context) if SUMMARY_META in m.meta), None)
    s = job.settings
    return {
        "protocol": PROTOCOL,
        "session": job.session_id,
        "round": job.round,
        "budget": {
            "window": s.window,
            "threshold": s.threshold,
            "keep_recent": s.keep_recent,
            "summary_max_tokens": s.summary_max_tokens,
            "tokenizer": s.tokenizer,
        },
        "previous_summary": previous,
        "context": [message_to_dict(m) for m in job.context],
    }


def run_external(argv: list[str], job: Job) -> Outcome | None:
    """Run the command on one compaction and turn its answer into an :class:`Outcome`."""
    where = f"external candidate {shlex.join(argv)!r}: session {job.session_id} round {job.round}"
    try:
        proc = subprocess.run(
            argv,
            input=json.dumps(request_payload(job), ensure_ascii=True),
            capture_output=True,
            text=True,
            timeout=job.settings.external_timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ExternalError(f"{where}: timed out after {job.settings.external_timeout:g}s") from None
    except OSError as e:
        raise ExternalError(f"{where}: could not start: {e}") from None
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()[-5:]
        raise ExternalError(
            f"{where}: exited with status {proc.returncode}: {' | '.join(err) or '(no stderr)'}"
        )
    try:
        answer = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise ExternalError(f"{where}: stdout is not JSON ({e}); it began {proc.stdout[:120]!r}") from None
    try:
        return parse_answer(answer, job)
    except RecordError as e:
        raise ExternalError(f"{where}: bad answer: {e}") from None


def parse_answer(answer: Any, job: Job) -> Outcome | None:
    """Validate the command's answer; a wrong field raises :class:`RecordError` naming it."""
    if not isinstance(answer, dict):
        raise RecordError("(answer)", f"expected a JSON object, got {type(answer).__name__}")
    if answer.get("skip") is True:
        return None
    entries = answer.get("context")
    if not isinstance(entries, list):
        raise RecordError("context", "missing or not a list")
    by_id = {m.id: m for m in job.context}
    ctx: list[Message] = []
    for i, e in enumerate(entries):
        if isinstance(e, dict) and "ref" in e:
            if e["ref"] not in by_id:
                raise RecordError(
                    f"context[{i}].ref", f"{e['ref']!r} is not a message of the context it was sent"
                )
            ctx.append(by_id[e["ref"]])
        elif isinstance(e, dict) and "message" in e:
            ctx.append(message_from_dict(e["message"], f"context[{i}].message"))
        else:
            raise RecordError(f"context[{i}]", 'expected {"ref": id} or {"message": {...}}')
    summary = answer.get("summary", "")
    carried = answer.get("carried", [])
    seen = answer.get("seen", [])
    if not isinstance(summary, str):
        raise RecordError("summary", "expected a string")
    if not (isinstance(carried, list) and all(isinstance(c, str) for c in carried)):
        raise RecordError("carried", "expected a list of strings")
    if not (isinstance(seen, list) and all(isinstance(c, str) for c in seen)):
        raise RecordError("seen", "expected a list of message ids")
    accounting = {i: (message_chars(by_id[i]), 0) for i in seen if i in by_id}
    return Outcome(ctx, summary, None, None, None, list(carried), accounting)
