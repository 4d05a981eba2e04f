"""The question table's ``about`` column: what each exam question asked about, from the exam's
own source (the identifier, the generated question, the bank question)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

from evalkit.contracts import questions
from evalkit.facts import compute_facts
from evalkit.score import SessionView
from evalkit.score.asked import about
from evalkit.score.identifiers import question_id
from evalkit.score.judge import build_questions
from tests.score.test_judge_and_suites import judge_session


def test_each_exam_names_what_its_question_asked_about():
    s = judge_session()
    view = SessionView(s, compute_facts(s))
    view.extras["questions"] = build_questions(s, view.facts)
    bank_q = {"id": "hermes/7", "text": "Which file did the agent edit?"}
    view.extras["ctx"] = SimpleNamespace(banks={s.id: [bank_q]})
    ident = view.facts.identifiers[0]
    generated = view.extras["questions"][0]
    asked = [
        ("identifier", question_id(ident)),
        ("judge_offline", generated["id"]),
        ("judge", generated["id"]),
        ("exam_offline", "hermes/7@12"),  # a bank question is named with the message it was asked at
        ("exam_offline", "hermes/99@12"),  # not in the bank: left out, never guessed
    ]
    got = about(view, asked)
    assert got == {
        question_id(ident): ident.value,
        generated["id"]: generated["text"],
        "hermes/7@12": "Which file did the agent edit?",
    }


def test_a_scored_run_fills_about_and_a_version_1_table_still_loads(shared_tiny_run, tmp_path):
    run = shared_tiny_run
    q = questions.read(run)
    assert len(q) and q["about"].notna().all()
    facts = {}
    for line in (run / "corpus" / "facts.jsonl").read_text().splitlines():
        d = json.loads(line)
        facts[d["session"]] = {f"{i['kind']}:{i['value']}" for i in d["identifiers"]}
    ident = q[q["exam"] == "identifier"]
    assert len(ident)
    for sid, kind, value in zip(ident["session"], ident["kind"], ident["about"], strict=True):
        assert f"{kind}:{value}" in facts[sid]
    # a table written before the column (version 1) reads with about null
    old = tmp_path / "old"
    old.mkdir()
    pd.read_parquet(questions.path_of(run)).drop(columns=["about"]).to_parquet(questions.path_of(old))
    back = questions.read(old)
    assert list(back.columns) == questions.COLUMNS and back["about"].isna().all()
    pd.testing.assert_frame_equal(back.drop(columns=["about"]), q.drop(columns=["about"]))
