"""Report sections read the decision's typed records (evalkit.contracts.records), by attribute:
a field that was renamed or never modelled fails loudly instead of printing as "n/a"."""

from __future__ import annotations

import pandas as pd
import pytest

from evalkit.contracts.metrics_sessions import SESSION_COLUMNS
from evalkit.contracts.records import CorpusManifest, Decision, RunConfig, Timings
from evalkit.report.data import EVENT_FIELDS, ReportData
from evalkit.report.sections.effects import section_effects
from evalkit.report.sections.verdicts import section_verdicts

VERDICT = {
    "verdict": "ship",
    "reason": "better by 0.1",
    "deciding_metric": "tally_present",
    "deciding_p": 0.0123,
    "deciding_test": "sign-flip",
    "n_sessions": 42,
    "metrics": {
        "tally_present": {"role": "success", "direction": "higher", "estimate": 0.1, "ci": [0.05, 0.15]}
    },
}


def _data(tmp_path, decision: Decision) -> ReportData:
    events = pd.DataFrame(columns=[*EVENT_FIELDS, "summary_chars", "summary_failed", "over_limit", "line"])
    config = {"replay": {"arms": ["baseline", "lean"]}}
    return ReportData(
        tmp_path, RunConfig(config=config), CorpusManifest(), decision, Timings(), None, events,
        pd.DataFrame(columns=SESSION_COLUMNS),
    )  # fmt: skip


def test_the_verdict_row_comes_from_the_typed_record(tmp_path):
    data = _data(tmp_path, Decision.model_validate({"verdicts": {"lean": VERDICT}}))
    row = next(ln for ln in section_verdicts(data, tmp_path)[0].splitlines() if "`lean`" in ln)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == ["✅ ship", "`tally_present`", "+0.100 [+0.050, +0.150]", "0.012 (sign-flip)", "42",
                         "better by 0.1"]  # fmt: skip


def test_a_decision_without_deciding_p_says_so_and_a_null_one_is_none(tmp_path):
    older = {k: v for k, v in VERDICT.items() if k not in ("deciding_p", "deciding_test")}
    data = _data(
        tmp_path,
        Decision.model_validate({"verdicts": {"lean": older, "wide": {**VERDICT, "deciding_p": None}}}),
    )
    text = section_verdicts(data, tmp_path)[0]
    assert "n/a (decision.json predates `deciding_p`)" in next(
        ln for ln in text.splitlines() if "`lean`" in ln
    )
    assert "| none |" in next(ln for ln in text.splitlines() if "`wide`" in ln)


@pytest.mark.parametrize("section", [section_verdicts, section_effects])
def test_a_section_fed_untyped_verdicts_fails_loudly(tmp_path, section):
    # The JSON object as it was read by key before: a renamed field would have printed "n/a".
    renamed = {**VERDICT, "decidingMetric": VERDICT["deciding_metric"]}
    del renamed["deciding_metric"]
    data = _data(tmp_path, Decision.model_construct(verdicts={"lean": renamed}))
    with pytest.raises(AttributeError):
        section(data, tmp_path)


def test_the_report_holds_the_questions_it_reads_with_their_texts_as_categoricals(tmp_path):
    import pyarrow as pa

    from evalkit.contracts import questions
    from evalkit.report.data import QUESTION_COLUMNS, load_report_data

    rows = {c: [] for c in questions.COLUMNS}
    for i in range(12):
        for arm in ("baseline", "lean"):
            values = [
                "r",
                "identifier",
                f"symbol:{i % 5}",
                "symbol",
                "about it",
                arm,
                f"s{i % 3}",
                i,
                0,
                0,
                1.0,
                None,
            ]
            for c, v in zip(questions.COLUMNS, values, strict=True):
                rows[c].append(v)
    questions.write(questions.path_of(tmp_path), [pa.table(rows, schema=questions.SCHEMA)])
    q = load_report_data(tmp_path).questions
    assert q.columns.tolist() == QUESTION_COLUMNS  # not run, kind, round, replicate, about
    for c in ("exam", "question", "arm", "session"):
        assert isinstance(q[c].dtype, pd.CategoricalDtype), c
    assert sorted(q["question"].cat.categories) == list(q["question"].cat.categories)
