"""The synthetic corpus: deterministic, and its facts are what it was built to contain."""

from __future__ import annotations

import json

import pytest

from evalkit.contracts.config import CorpusConfig
from evalkit.contracts.session import session_to_json, tool_pairs_valid
from evalkit.corpus import build_corpus
from evalkit.corpus.synth import generate, generate_session
from evalkit.facts import compute_facts


def test_same_seed_same_bytes_other_seed_other_bytes():
    a = session_to_json(generate_session(3, 1))
    assert a == session_to_json(generate_session(3, 1))
    assert a != session_to_json(generate_session(4, 1))


def test_sessions_are_well_formed_and_carry_the_planned_content():
    unfixed = 0
    for i in range(6):
        s = generate_session(11, i)
        assert tool_pairs_valid(s.messages)
        f = compute_facts(s)
        assert f.tallies and f.failures
        # The generator records the constraints it planted; each is a line of a user message.
        planted = s.meta["planted"]["constraints"]
        users = "\n".join(m.text for m in s.messages if m.is_genuine_user())
        assert len(planted) >= 3 and all(c in users for c in planted)
        assert any(x.fixed_at for x in f.failures)  # some failures fixed later
        unfixed += sum(1 for x in f.failures if x.fixed_at is None)
        reads = [x.path for x in f.files_read]
        assert reads[:2] == ["PROJECT.md", "MEMORY.md"]
        # Longer than the default trigger (window 200,000 − reserve 16,384 tokens at chars/4).
        assert len(session_to_json(s)) / 4 > 183_616
    assert unfixed > 0  # and some never


@pytest.mark.slow
def test_corpus_tally_position_and_pastes(tmp_path):
    """Most long test outputs have their tally past char 2,000 (../shared/transcripts: 14 of 16;
    seed 000: 66%), and oversized pastes (seed 003) are 50-65 KiB."""
    m = build_corpus(CorpusConfig(sessions=24), 5, tmp_path, workers=2)
    st = m["stats"]
    assert st["sessions"] == 24
    assert 0.8 <= st["tally_past_2000_share"] <= 0.98
    sizes = []
    with open(tmp_path / "sessions.jsonl") as fh:
        for line in fh:
            for msg in json.loads(line)["messages"]:
                if msg["role"] == "user":
                    sizes.append(sum(len(b.get("text", "")) for b in msg["blocks"]))
    pastes = [n for n in sizes if n > 40_000]
    assert pastes and all(50 * 1024 <= n <= 66 * 1024 + 200 for n in pastes)


def test_compare_with_the_real_transcripts(transcripts, capsys):
    """`evalkit synth --compare` measures both corpora the same way; the shapes the generator
    targets are within the stated distance of ../shared/transcripts (4 sessions: a fast check,
    the note reports the 40-session table)."""
    from evalkit.cli import main
    from evalkit.corpus.compare import THRESHOLD, compare, load, measure

    real = measure(load(transcripts))
    synthetic = measure(generate(20261130, 4))
    rows = {r.name: r for r in compare(synthetic, real)}
    for name in (
        "tool_output_chars",
        "call_fails",
        "failing_call_kind",
        "user_turn_chars",
        "user_turn_paste",
    ):
        assert rows[name].judged and rows[name].distance <= THRESHOLD, rows[name]
    assert main(["synth", "--compare", str(transcripts), "--sessions", "2"]) == 0
    out = capsys.readouterr().out
    assert "| tool_output_chars" in out and "threshold 0.2" in out


def test_seed_situations_are_planted_at_their_rates():
    """Seed 003's oversized pastes and seed 004's giant written files occur in some sessions, not all."""
    giant = pastes = 0
    for i in range(60, 100):
        s = generate_session(20261130, i)
        giant += any(len(str(c.args)) > 500_000 for m in s.messages for c in m.tool_calls())
        pastes += any(m.role == "user" and len(m.text) > 50 * 1024 for m in s.messages)
    assert 1 <= giant <= 10 and 1 <= pastes <= 12
