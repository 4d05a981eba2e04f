"""Probe banks: hermes-agent's *.probes.json read unchanged, clear errors, rows per question."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalkit import load_run
from evalkit.cli import main
from evalkit.score.banks import BankError, load_bank, parse_bank, to_evalkit
from evalkit.score.factmatch import Fact

ROOT = Path(__file__).resolve().parents[2]
SID = "12a546d1-83a7-49a6-abba-5400db340b43"
HERMES_BANK = ROOT / "probes" / "banks" / f"{SID}.probes.json"
TRANSCRIPT = f"claude-code/daaain-claude-code-log/-Users-dain-workspace-claude-code-log-sample__{SID}.jsonl"


def test_hermes_bank_reads_unchanged_and_names_its_session_from_the_file():
    qs = load_bank(HERMES_BANK)
    assert len(qs) == 8 and {q.session for q in qs} == {SID}
    assert {q.kind for q in qs} == {"recall", "artifact", "continuation", "decision"}
    first = qs[0]
    assert first.id == "deleted-module" and first.bank == SID and Fact(("renderer.py",)) in first.expected_facts
    # Round trip through evalkit's own format keeps every question.
    again = parse_bank(to_evalkit(qs), f"{SID}.json")
    assert [(q.id, q.session, q.kind, q.expected_facts) for q in again] == [
        (q.id, q.session, q.kind, q.expected_facts) for q in qs
    ]


def test_own_format_with_answerable_window_and_session_per_question():
    raw = {
        "format": "evalkit.bank/1",
        "questions": [
            {
                "id": "a",
                "session": "s1",
                "kind": "recall",
                "question": "?",
                "expected_facts": ["x"],
                "from": 3,
                "until": 9,
            }
        ],
    }
    (q,) = parse_bank(raw, "mine.json")
    assert (q.session, q.answerable_from, q.until) == ("s1", 3, 9)
    assert q.as_judge_question()["source"] == 3


@pytest.mark.parametrize(
    "probe, field",
    [
        ({"type": "recall", "question": "?"}, "questions[0].expected_facts"),
        ({"type": "guess", "question": "?", "expected_facts": ["x"]}, "questions[0].kind"),
        ({"type": "recall", "expected_facts": ["x"]}, "questions[0]: missing question"),
        ({"type": "recall", "question": "?", "expected_facts": ["x"], "from": -1}, "questions[0].from"),
    ],
)
def test_bad_questions_name_file_question_and_field(probe, field):
    with pytest.raises(
        BankError, match=r"bank\.probes\.json: " + field.replace("[", r"\[").replace("]", r"\]")
    ):
        parse_bank({"probes": [probe]}, "bank.probes.json")


def test_invalid_json_names_the_line(tmp_path):
    p = tmp_path / "x.probes.json"
    p.write_text('{"probes": [\n  {"id": 1,,}\n]}')
    with pytest.raises(BankError, match=r"x\.probes\.json:2: invalid JSON"):
        load_bank(p)


def test_a_real_session_bank_scores_per_question_rows_and_the_ceiling_is_highest(
    tmp_path, transcripts, capsys
):
    """The hermes-style bank on its real session: a row per question per event per arm, in the
    metrics table; the uncompacted arm (nothing ever leaves) answers every question."""
    corpus = tmp_path / "corpus"
    assert main(["import", "auto", str(transcripts / TRANSCRIPT), "--out", str(corpus)]) == 0
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        'name = "bank"\n[corpus]\nkind = "path"\npath = "corpus"\n'
        '[replay]\narms = ["baseline", "masking", "uncompacted"]\ntrigger = "messages"\nmax_messages = 20\n'
        f'[score]\nbanks = ["{HERMES_BANK}"]\n[continuation]\nenabled = false\n'
    )
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 0
    from evalkit.contracts import questions

    m = load_run(tmp_path / "r").metrics
    asked = questions.read(tmp_path / "r")
    q = asked[(asked["exam"] == "exam_offline") & asked["question"].str.startswith(f"{SID}/")]
    assert q["error"].isna().all() and q["kind"].eq(SID).all()
    events = load_run(tmp_path / "r").events().groupby("arm").size()
    assert (q.groupby("arm").size() == events * 8).all()  # every question is current at every event
    ex = m[m["metric"] == "exam_offline"]
    exam = ex.groupby("arm")["value"].mean()
    assert exam.idxmax() == "uncompacted" and exam["baseline"] < exam["uncompacted"]
    # Early events come before some answers exist (a hermes bank has no "from"); by the ceiling's
    # last event every expected fact of the bank is in the session, stated as written.
    last = ex[ex["arm"] == "uncompacted"].sort_values("event")["value"].iloc[-1]
    assert last == 1.0
    # The default report: the scorecard with the bank's paired counts and its plot, and masking
    # (which never drops a message under a message-count trigger) flagged as looping.
    md = (tmp_path / "r" / "report" / "report.md").read_text()
    sc = md.split("## Scorecard: exam score vs tokens kept")[1].split("\n## ")[0]
    assert "| `uncompacted` (ceiling) |" in sc and "fig-scorecard.png" in sc
    assert "bank exam: W / L / T" in sc and "8-question exam" in sc
    # Bank questions pair only at the same point: under a message-count trigger the ceiling records
    # its events elsewhere than the baseline compacts, so most of its questions stay unpaired.
    row = re.search(r"\| `uncompacted` \(ceiling\) \|.*\| (\d+) / (\d+) / (\d+) \(\+(\d+) unpaired\) \|", sc)
    assert row and int(row[4]) > 0 and int(row[2]) == 0
    # No hand-written explanation of a ceiling below a compacted arm: the exam checks itself.
    assert "artefact" not in md and "**The ceiling scores below" not in md
    cad = md.split("## Cadence and cost per compaction")[1].split("\n## ")[0]
    assert "`masking` **LOOPING**" in cad and "**Looping:** `masking`:" in cad
    # the offline stand-in records no calls and the run has no price table: no seconds, no dollars
    assert re.search(r"\| `baseline` \|.*\| n/a \(not recorded\) \| n/a \(no prices\) \|", cad)
    assert re.search(r"\| `masking` \*\*LOOPING\*\* \|.*\| – \(no call\) \| – \(no call\) \|", cad)
    assert (tmp_path / "r" / "report" / "fig-scorecard.png").stat().st_size > 10_000
    assert (
        json.loads((tmp_path / "r" / "corpus" / "banks.json").read_text())[SID][0]["id"]
        == f"{SID}/deleted-module"
    )


def test_probes_import_writes_evalkit_format_and_rejects_a_bad_bank(tmp_path, capsys):
    out = tmp_path / "mine.json"
    assert main(["probes", "import", str(HERMES_BANK), "--out", str(out)]) == 0
    assert "8 questions about 1 session(s)" in capsys.readouterr().out
    written = json.loads(out.read_text())
    assert written["format"] == "evalkit.bank/1" and len(load_bank(out)) == 8
    bad = tmp_path / "bad.probes.json"
    bad.write_text(json.dumps({"probes": [{"type": "recall", "question": "?", "expected_facts": []}]}))
    assert main(["probes", "import", str(bad), "--out", str(tmp_path / "x.json")]) == 2
    assert "bad.probes.json: questions[0].expected_facts" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()

