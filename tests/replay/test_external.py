"""external:CMD candidates: a real subprocess per compaction, with clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evalkit.contracts.config import ModelConfig
from evalkit.contracts.event import resolve_context
from evalkit.replay import ReplaySettings, replay_session
from evalkit.replay.external import ExternalError, external_policy
from tests.support.replay_sessions import Builder, filler_turns

SCRIPT = Path(__file__).parents[1] / "support" / "external_compactor.py"
MODEL = ModelConfig(backend="extractive", model="extractive-v1")
SMALL = ReplaySettings(window=6_000, reserve=1_000, keep_recent=800, external_timeout=2)


def _session():
    b = Builder()
    b.user("Go.")
    filler_turns(b, 22)
    return b.session()


def arm(mode: str) -> str:
    return f"external:{sys.executable} {SCRIPT} {mode}"


def test_external_command_compacts_through_the_json_protocol():
    s = _session()
    evs = replay_session(s, arm("ok"), SMALL, MODEL)
    assert len(evs) == 1
    ev = evs[0]
    assert ev.summary_error is None and ev.summary.startswith("round 1:")
    ctx = resolve_context(ev, {m.id: m for m in s.messages})
    assert ctx[0].role == "system" and ctx[1].text == ev.summary and len(ctx) <= 8
    assert ev.invariants.tool_pairs_valid and ev.tokens_after < ev.tokens_before
    # Nothing was shown to a summarizer, so everything that left counts as lost.
    assert ev.invariants.lost_chars > 0 and ev.request is None


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("crash", "exited with status 3: compactor exploded: KeyError 'budget'"),
        ("sleep", "timed out after 2s"),
        ("badjson", "stdout is not JSON"),
        ("badref", "bad answer: context[7].ref: 'no-such-id' is not a message of the context"),
    ],
)
def test_external_failures_are_recorded_as_clear_errors(mode, message):
    s = _session()
    settings = ReplaySettings(window=6_000, reserve=1_000, keep_recent=800, external_timeout=2)
    evs = replay_session(s, arm(mode), settings, MODEL)
    assert evs, "a failed compaction is still an event"
    first = evs[0]
    assert message in first.summary_error and "session t round 1" in first.summary_error
    assert first.summary == "" and first.removed_ids == [] and first.tokens_after == first.tokens_before
    assert len(evs) == 1 and first.meta == {"stopped": True}  # no retry at every later turn


def test_external_policy_needs_a_command():
    with pytest.raises(ValueError, match="needs a command"):
        external_policy("  ")
    assert issubclass(ExternalError, RuntimeError)
