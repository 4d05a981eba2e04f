"""The metrics table's writers: the Arrow path the stages use (rows held as Arrow, not tuples)
writes the bytes the pandas path writes, and the checked loader names a bad row."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

from evalkit.contracts.metrics import COLUMNS, MetricRow, load_metrics, normalize, rows_to_arrow
from evalkit.contracts.metrics_stream import replace_rows, write_metrics, write_table


def _rows() -> list[tuple]:
    rows = []
    for arm in ("cand", "baseline", "aa"):
        for s in ("s2", "s10", "s1"):
            for e in (3, -1, 0):
                rows.append(MetricRow("run-1", arm, s, e, e + 1, 0, "recall", 0.25 * e).as_tuple())
                rows.append(MetricRow.failed("run-1", arm, s, e, e + 1, 0, "judge_q:é", "timeout").as_tuple())
                rows.append(MetricRow("run-1", arm, s, e, e + 1, 1, "cont_calls", float(e)).as_tuple())
    return rows[::-1]  # not in canonical order: the writers sort


def test_arrow_writer_writes_the_bytes_of_a_normalized_frame(tmp_path):
    rows = _rows()
    frame = normalize(pd.DataFrame(rows, columns=COLUMNS))
    frame.to_parquet(tmp_path / "pandas.parquet", index=False)  # what the stages wrote before
    write_table(rows_to_arrow(rows), tmp_path / "arrow.parquet")
    write_metrics(pd.DataFrame(rows, columns=COLUMNS), tmp_path / "frame.parquet")
    want = (tmp_path / "pandas.parquet").read_bytes()
    assert (tmp_path / "arrow.parquet").read_bytes() == want
    assert (tmp_path / "frame.parquet").read_bytes() == want
    back = pd.read_parquet(tmp_path / "arrow.parquet")
    assert back["value"].isna().sum() == 27 and set(back["error"].dropna()) == {"timeout"}
    assert list(back["session"][:3]) == ["s1", "s1", "s1"] and back["arm"].iloc[0] == "aa"


def test_replace_rows_swaps_one_stages_rows_and_keeps_the_others(tmp_path):
    rows = _rows()
    path = tmp_path / "metrics.parquet"
    cont = [r for r in rows if r[6].startswith("cont_")]
    probes = [r for r in rows if not r[6].startswith("cont_")]
    write_table(rows_to_arrow(probes), path)
    replace_rows(path, rows_to_arrow(cont), lambda m: m.startswith("cont_"))
    write_table(rows_to_arrow(rows), tmp_path / "whole.parquet")
    assert path.read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    changed = [(*r[:7], 9.0, None) for r in cont[:2]]
    replace_rows(path, rows_to_arrow(changed), lambda m: m.startswith("cont_"))
    t = pq.read_table(path).to_pandas()
    assert len(t) == len(probes) + 2 and (t.loc[t["metric"] == "cont_calls", "value"] == 9.0).all()


def test_load_metrics_names_a_missing_text_value(tmp_path):
    rows = _rows()
    rows[4] = (*rows[4][:2], None, *rows[4][3:])  # a row without its session
    path = tmp_path / "metrics.parquet"
    pd.DataFrame(rows, columns=COLUMNS).astype({"session": "string"}).to_parquet(path, index=False)
    with pytest.raises(ValueError, match=r"column session, row 4: <NA> is not a valid value"):
        load_metrics(path)
    write_table(rows_to_arrow(_rows()), path)
    df = load_metrics(path)
    assert len(df) == len(_rows()) and df["value"].isna().sum() == 27 and df["error"].notna().sum() == 27
