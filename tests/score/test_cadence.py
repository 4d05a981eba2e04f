"""Cadence: masking under a message-count trigger re-compacts every turn and is flagged as a loop."""

from __future__ import annotations

from evalkit.contracts.config import ModelConfig
from evalkit.facts import compute_facts
from evalkit.models import make_client
from evalkit.replay import ReplaySettings, replay_session
from evalkit.score import SessionView, Suite, score_events
from tests.support.replay_sessions import Builder, filler_turns

MODEL = ModelConfig(backend="extractive", model="extractive-v1")
MESSAGES = ReplaySettings(trigger="messages", max_messages=20)


def _rows(arms):
    b = Builder()
    b.user("Long task.")
    filler_turns(b, 40)
    s = b.session()
    events = {a: replay_session(s, a, MESSAGES, MODEL, make_client(MODEL)) for a in arms}
    rows = score_events(SessionView(s, compute_facts(s)), events, Suite("c", [("cadence", {})]))
    return events, {(r.arm, r.metric, r.event): r.value for r in rows}


def test_masking_under_a_message_trigger_loops_and_the_baseline_does_not():
    events, got = _rows(["baseline", "masking", "uncompacted"])
    n_mask, n_base = len(events["masking"]), len(events["baseline"])
    assert n_mask > 3 * n_base  # it fires again at the next turn: masking never drops a message
    assert got[("masking", "loop_share", -1)] > 0.9 and got[("baseline", "loop_share", -1)] == 0.0
    later = [got[("masking", "turns_between", k)] for k in range(1, n_mask)]
    assert max(later) <= 2
    assert got[("masking", "compactions_per_100k", -1)] > 3 * got[("baseline", "compactions_per_100k", -1)]
    # Masking calls no summarizer; the extractive baseline calls it once per compaction.
    assert got[("masking", "summarizer_calls", 0)] == 0 and got[("baseline", "summarizer_calls", 0)] == 1
    assert got[("baseline", "summarizer_input_tokens", 0)] > got[("baseline", "summarizer_output_tokens", 0)] > 0
    # The ceiling never compacts: only its tokens kept, no cadence.
    assert ("uncompacted", "loop", 0) not in got and got[("uncompacted", "tokens_kept", 0)] > 0
