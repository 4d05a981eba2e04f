"""Streaming JSONL I/O: bad records get file:line: field: reason, skip mode counts them."""

from __future__ import annotations

import json

import pytest

from evalkit.contracts.config import CorpusConfig
from evalkit.contracts.session import Message, Session, Source, Text, session_to_json
from evalkit.corpus import QUESTIONS, CorpusError, ReadStats, build_corpus, read_sessions, write_sessions


def _good(i: int) -> str:
    return session_to_json(
        Session(f"s{i}", Source("synthetic"), [Message("m0", "user", [Text(f"hello {i}")])])
    )


@pytest.fixture
def bad_corpus(tmp_path):
    good = json.loads(_good(0))
    wrong_type = dict(good, id="s2", messages=[{"id": "m", "role": "user", "blocks": "nope"}])
    unknown_role = dict(good, id="s3", messages=[{"id": "m", "role": "robot", "blocks": []}])
    big = dict(
        good,
        id="s5",
        messages=[{"id": "m", "role": "user", "blocks": [{"type": "text", "text": "x" * 10_000_000}]}],
    )
    lines = [
        _good(1).encode(),
        json.dumps(wrong_type).encode(),
        json.dumps(unknown_role).encode(),
        b'{"schema": "evalkit.session/1", "id": "s4", "source": {"format": "x"}, "messages": [\xff\xfe]}',
        json.dumps(big).encode(),
        _good(6).encode(),
        _good(7)[:40].encode(),  # truncated last line (no newline)
    ]
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(lines))
    return p


def test_raise_mode_stops_at_first_bad_record_with_location(bad_corpus):
    it = read_sessions(bad_corpus)
    assert next(it).id == "s1"
    with pytest.raises(CorpusError) as e:
        next(it)
    assert str(e.value) == f"{bad_corpus}:2: messages[0].blocks: expected list, got str"


def test_skip_mode_counts_every_bad_record(bad_corpus):
    stats = ReadStats()
    # The bound is set low here to see an oversized record refused (the default reads 10 MB).
    ids = [s.id for s in read_sessions(bad_corpus, "skip", stats, max_record_bytes=8 * 1024 * 1024)]
    assert ids == ["s1", "s6"]
    assert stats.records == 7 and stats.sessions == 2 and stats.skipped_count == 5
    msgs = [str(e) for e in stats.skipped]
    assert msgs[0].endswith(":2: messages[0].blocks: expected list, got str")
    assert msgs[1].endswith(
        ":3: messages[0].role: unknown role 'robot' (expected one of system, user, assistant, tool)"
    )
    assert ":4: (bytes): not UTF-8 at byte" in msgs[2]
    assert msgs[3].endswith(":5: (record): record larger than 8388608 bytes")
    assert ":7: (json): truncated JSON" in msgs[4]
    assert "skipped 5" in stats.summary()


def test_write_then_read_round_trip(tmp_path):
    sessions = [json.loads(_good(i)) for i in range(3)]
    from evalkit.contracts.session import session_from_dict

    rows = write_sessions(tmp_path / "c.jsonl", (session_from_dict(d) for d in sessions))
    assert [r["id"] for r in rows] == ["s0", "s1", "s2"]
    assert [s.id for s in read_sessions(tmp_path / "c.jsonl")] == ["s0", "s1", "s2"]
    assert not (tmp_path / "c.jsonl.tmp").exists()


def test_validate_cli_reports_and_exits_2(bad_corpus, capsys):
    from evalkit.cli import main

    assert main(["validate", str(bad_corpus), "--skip"]) == 2
    out = capsys.readouterr()
    assert "3 sessions read from 7 records; skipped 4" in out.out  # the 10 MB session is read
    assert f"{bad_corpus}:3: messages[0].role" in out.err


def test_a_rebuilt_corpus_drops_questions_pinned_to_the_old_one(tmp_path):
    """Judge questions point at message indices of the corpus they were built from."""
    out = tmp_path / "corpus"
    build_corpus(CorpusConfig(sessions=1), 1, out, workers=1)
    (out / QUESTIONS).write_text('{"session": "synth-1-00000", "questions": []}\n')
    build_corpus(CorpusConfig(sessions=1), 2, out, workers=1)
    assert not (out / QUESTIONS).exists() and (out / "sessions.jsonl").exists()
