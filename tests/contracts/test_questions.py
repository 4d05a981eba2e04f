"""The exam question table (evalkit.contracts.questions): the grades a probe names
``<exam>_q:<question>`` leave the metric rows for their own table, unchanged."""

from __future__ import annotations

import math

import pandas as pd

from evalkit.contracts import questions
from evalkit.contracts.metrics import MetricRow, question_family, rows_to_arrow


def _rows() -> list[MetricRow]:
    return [
        MetricRow("r", "baseline", "s1", 3, 1, 0, "identifier_exam", 0.5),
        MetricRow("r", "baseline", "s1", 3, 1, 0, "identifier_q:symbol:0092b45bb4", 1.0),
        MetricRow("r", "baseline", "s1", 3, 1, 0, "identifier_q:error:aa11", 0.0),  # a real 0: a miss
        MetricRow.failed("r", "baseline", "s1", 3, 1, 0, "exam_q:bank/7@12", "answer call failed"),
        MetricRow("r", "head-tail", "s2", 5, 2, 1, "exam_offline_q:bank/7@40", 0.25),
        MetricRow("r", "head-tail", "s2", 5, 2, 1, "judge_offline_q:q3", 4.0),
        MetricRow("r", "head-tail", "s2", -1, -1, 1, "tally_present", 1.0),
    ]


def test_question_rows_leave_the_metrics_and_keep_every_field(tmp_path):
    metric_rows, asked = questions.split(rows_to_arrow([r.as_tuple() for r in _rows()]))
    assert metric_rows.column("metric").to_pylist() == ["identifier_exam", "tally_present"]
    q = questions.from_metric_rows(asked)
    assert questions.write(tmp_path / "q.parquet", [q]) == 5
    t = pd.read_parquet(tmp_path / "q.parquet")
    assert t["exam"].tolist() == ["identifier", "identifier", "exam", "exam_offline", "judge_offline"]
    assert t["question"].tolist() == ["symbol:0092b45bb4", "error:aa11", "bank/7@12", "bank/7@40", "q3"]
    assert t["kind"].tolist()[:4] == ["symbol", "error", "bank", "bank"] and pd.isna(t["kind"].iloc[4])
    # an error is an error (no grade), never a 0; a miss is a 0
    failed = t[t["exam"] == "exam"].iloc[0]
    assert failed["error"] == "answer call failed" and math.isnan(failed["grade"])
    assert t[t["question"] == "error:aa11"]["grade"].tolist() == [0.0]
    # shown as metric rows again they are the rows the probes wrote
    back = questions.metric_rows(t)
    want = [r for r in _rows() if question_family(r.metric) is not None]
    assert back["metric"].tolist() == [r.metric for r in want]
    assert [
        (a, s, e, rd, rp)
        for a, s, e, rd, rp in zip(
            back["arm"], back["session"], back["event"], back["round"], back["replicate"], strict=True
        )
    ] == [(r.arm, r.session, r.event, r.round, r.replicate) for r in want]
    assert back["value"].fillna(-1).tolist() == [-1 if math.isnan(r.value) else r.value for r in want]


def test_a_run_without_a_question_table_reads_as_empty(tmp_path):
    t = questions.read(tmp_path)
    assert list(t.columns) == questions.COLUMNS and t.empty


def test_a_run_folder_from_before_the_question_table_reads_its_questions_from_the_metrics(tmp_path):
    from evalkit.contracts.metrics_stream import write_table

    write_table(rows_to_arrow([r.as_tuple() for r in _rows()]), tmp_path / "metrics.parquet")
    t = questions.read(tmp_path)
    assert sorted(t["question"]) == sorted(
        ["symbol:0092b45bb4", "error:aa11", "bank/7@12", "bank/7@40", "q3"]
    )
    assert questions.read(tmp_path, ("identifier",))["exam"].tolist() == ["identifier", "identifier"]


def test_reading_some_arms_gives_those_arms_rows_of_the_whole_table(tmp_path):
    from evalkit.contracts.metrics_stream import write_table

    legacy, current = tmp_path / "legacy", tmp_path / "current"
    legacy.mkdir(), current.mkdir()
    write_table(rows_to_arrow([r.as_tuple() for r in _rows()]), legacy / "metrics.parquet")
    _, asked = questions.split(rows_to_arrow([r.as_tuple() for r in _rows()]))
    questions.write(questions.path_of(current), [questions.from_metric_rows(asked)])
    for run in (legacy, current):
        whole = questions.read(run)
        some = questions.read(run, arms=("head-tail",))
        assert some["question"].tolist() == ["bank/7@40", "q3"]
        pd.testing.assert_frame_equal(some, whole[whole["arm"] == "head-tail"].reset_index(drop=True))
        assert questions.read(run, ("identifier",), ("head-tail",)).empty


def test_reading_some_arms_and_columns_decodes_only_those(tmp_path, monkeypatch):
    _, asked = questions.split(rows_to_arrow([r.as_tuple() for r in _rows()]))
    questions.write(questions.path_of(tmp_path), [questions.from_metric_rows(asked)])
    cols = ["exam", "session", "question", "grade"]  # not the arm filtered on
    decoded: list[list[str]] = []
    read_where = questions.read_where

    def spy(path, where, columns=None):
        decoded.append(list(columns or questions.COLUMNS))
        return read_where(path, where, columns)

    monkeypatch.setattr(questions, "read_where", spy)
    some = questions.read(tmp_path, arms=("head-tail",), columns=cols)
    assert decoded and set(decoded[0]) == {*cols, "arm"}  # not `about` (a string per question)
    whole = questions.read(tmp_path)
    assert some.columns.tolist() == cols
    pd.testing.assert_frame_equal(some, whole[whole["arm"] == "head-tail"][cols].reset_index(drop=True))


def test_an_encoded_read_holds_each_text_once_and_reads_as_the_text(tmp_path):
    _, asked = questions.split(rows_to_arrow([r.as_tuple() for r in _rows()]))
    questions.write(questions.path_of(tmp_path), [questions.from_metric_rows(asked)])
    cols = [c for c in questions.COLUMNS if c != "about"]
    plain = questions.read(tmp_path, columns=cols)
    coded = questions.read(tmp_path, columns=cols, encoded=True)
    for c in ("exam", "question", "arm", "session"):
        assert isinstance(coded[c].dtype, pd.CategoricalDtype), c  # codes per row, each text once
        assert list(coded[c].cat.categories) == sorted(set(plain[c])), c  # ordered as the text
        assert coded[c].astype(object).tolist() == plain[c].astype(object).tolist(), c
    pd.testing.assert_frame_equal(coded[["event", "grade"]], plain[["event", "grade"]])
