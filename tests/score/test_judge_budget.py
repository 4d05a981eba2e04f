"""The offline judge's reading budget, chosen on held-out sessions (evalkit.score.judge_budget)."""

from __future__ import annotations

import hashlib
import json
import math
import shutil

import pytest

from evalkit import load_run
from evalkit.cli import main
from evalkit.contracts.metrics_sessions import arm_summary
from evalkit.report.sections.scorecard import held_out
from evalkit.score.judge_budget import (
    CALIBRATION,
    GRID,
    REPORTED,
    Calibration,
    choose_budget,
    load,
    part,
    split,
    with_budget,
)
from evalkit.score.suite import Suite


def test_the_smallest_budget_within_one_point_of_the_best_is_chosen():
    # the calibration sweep measured on the real sessions (docs/probe-banks.md)
    sweep = {2000: 54.0, 4000: 61.3, 8000: 90.3, 16000: 96.1, 32000: 100.0, 64000: 100.0, 128000: 100.0}
    assert choose_budget(sweep) == 32000
    assert choose_budget({**sweep, 16000: 99.0}) == 16000  # exactly 1 point below counts as within
    assert choose_budget({**sweep, 16000: 98.99}) == 32000
    assert choose_budget({**sweep, 64000: 100.5}) == 32000  # 100.0 is within 1 of 100.5
    assert choose_budget({**sweep, 64000: 101.5}) == 64000
    assert choose_budget({4000: 80.0, 2000: 80.0}) == 2000  # order of the mapping does not matter
    assert choose_budget({2000: math.nan, 4000: 70.0, 8000: 69.5}) == 4000  # NaN: no question asked
    assert choose_budget(sweep, tolerance=5.0) == 16000
    with pytest.raises(ValueError, match="no question"):
        choose_budget({2000: math.nan})


def test_the_held_out_split_is_a_fixed_hash_of_the_session_id():
    # pinned values: the split must never change under a session (it would then be both parts)
    assert part("12a546d1-83a7-49a6-abba-5400db340b43") == CALIBRATION
    assert [part(s) for s in ("s000", "s001", "s002", "s003", "s004", "s005")] == [
        REPORTED,
        REPORTED,
        REPORTED,
        CALIBRATION,
        CALIBRATION,
        REPORTED,
    ]
    for s in ("s000", "s003", "a/b", "é"):
        h = int(hashlib.sha256(f"judge-budget:{s}".encode()).hexdigest()[:8], 16)
        assert part(s) == (CALIBRATION if h % 3 == 0 else REPORTED)
    ids = [f"sess-{k}" for k in range(3000)]
    a, b = split(ids), split(reversed(ids + ids[:10]))  # order and repeats do not matter
    assert a == b and sorted(a[CALIBRATION] + a[REPORTED]) == sorted(ids)
    assert len(a[CALIBRATION]) == 994  # about a third


def test_with_budget_sets_only_the_judge_budget():
    s = Suite("default", [("identifiers", {"max_questions": 8}), ("judge", {"per_kind": 1})])
    got = with_budget(s, 32000)
    assert got.probes == [
        ("identifiers", {"max_questions": 8}),
        ("judge", {"per_kind": 1, "max_chars": 32000}),
    ]
    assert s.probes[1] == ("judge", {"per_kind": 1})
    with pytest.raises(ValueError, match="no judge probe"):
        with_budget(Suite("x", [("identifiers", {})]), 1000)


def test_held_out_drops_only_the_generated_exam_of_calibration_sessions():
    import pandas as pd

    m = pd.DataFrame(
        {
            "session": ["c", "c", "c", "r"],
            "metric": [
                "judge_offline_overall",
                "judge_offline_q:x",
                "identifier_recall",
                "judge_offline_overall",
            ],
        }
    )
    assert held_out(m, ["c"]).to_dict("list") == {
        "session": ["c", "r"],
        "metric": ["identifier_recall", "judge_offline_overall"],
    }
    assert held_out(m, []) is m


FOLDERS = ("aider", "openhands", "swe-agent")


@pytest.mark.slow
def test_calibrated_run_on_real_sessions_reports_the_held_out_part(tmp_path, transcripts, capsys):
    """``[score] judge_budget = "calibrate"`` on the real sessions: the budget is chosen by the rule
    from the ceiling arm on the calibration part, every arm is scored at it, and the scorecard's
    generated exam uses the reported part only. ``evalkit judge-budget RUN`` gives the same."""
    # Three formats (37 sessions, 12 on the calibration side): what is checked (the split, the
    # sweep, the report's held-out part) needs sessions on both sides of the split, not all of them.
    src = tmp_path / "src"
    for folder in FOLDERS:
        if (transcripts / folder).is_dir():
            shutil.copytree(transcripts / folder, src / folder)
    if not src.is_dir():
        pytest.skip(f"none of {FOLDERS} in ../shared/transcripts")
    corpus = tmp_path / "corpus"
    assert main(["import", "auto", str(src), "--out", str(corpus)]) == 0
    cfg = tmp_path / "exp.toml"
    body = (
        'name = "jb"\nseed = 20261130\n[corpus]\nkind = "path"\npath = "corpus"\n'
        '[replay]\narms = ["baseline", "uncompacted"]\ntrigger = "messages"\nmax_messages = 20\n'
        '[score]\njudge_budget = "{}"\n[continuation]\nenabled = false\n'
    )
    cfg.write_text(body.format("32k"))
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "bad")]) == 2
    assert "score.judge_budget" in capsys.readouterr().err
    cfg.write_text(body.format("calibrate").replace('"baseline", "uncompacted"', '"baseline"'))
    assert main(["run", "--config", str(cfg), "--run-dir", str(tmp_path / "bad")]) == 2
    assert 'needs the ceiling arm "uncompacted"' in capsys.readouterr().err
    cfg.write_text(body.format("calibrate"))
    run = tmp_path / "r"
    assert main(["run", "--config", str(cfg), "--run-dir", str(run)]) == 0
    cal = load(run)
    assert isinstance(cal, Calibration) and cal.grid == list(GRID)
    assert cal.budget == choose_budget({b: v["mean"] for b, v in cal.sweep.items()})
    sessions = [json.loads(ln)["id"] for ln in (corpus / "sessions.jsonl").read_text().splitlines()]
    assert cal.calibration == sorted(s for s in sessions if part(s) == CALIBRATION)
    assert cal.reported == sorted(s for s in sessions if part(s) == REPORTED)
    m = load_run(run).metrics
    # the run was scored at the chosen budget: the ceiling on the calibration part scores what the
    # sweep measured there at that budget
    cal_rows = m[m["session"].isin(cal.calibration)]
    got = arm_summary(cal_rows, "judge_offline_overall", 5.0).loc["uncompacted"]
    assert got["n"] == cal.sweep[cal.budget]["n"] > 0
    assert 100 * got["mean"] == pytest.approx(cal.sweep[cal.budget]["mean"])
    # the scorecard's generated exam: reported sessions only, with their n
    rep = arm_summary(m[m["session"].isin(cal.reported)], "judge_offline_overall", 5.0)
    md = (run / "report" / "report.md").read_text()
    sc = md.split("## Scorecard: exam score vs tokens kept")[1].split("\n## ")[0]
    assert "**The generated exam is reported on held-out sessions.**" in sc
    assert f"| {cal.budget:,} **(chosen)** |" in sc
    base = rep.loc["baseline"]
    line = next(ln for ln in sc.splitlines() if ln.startswith("| `baseline` |"))
    assert f"| {100 * base['mean']:.1f}% ± {100 * base['half']:.1f} |" in line
    header = next(ln for ln in sc.splitlines() if ln.startswith("| arm |"))
    col = [c.strip() for c in header.strip("|").split("|")].index("sessions (per score)")
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[col].startswith(f"{int(base['n'])} / ")  # the generated exam's n first
    # the command on the finished run: the same choice, written again
    before = (run / "judge-budget.json").read_text()
    assert main(["judge-budget", str(run)]) == 0
    assert f"judge budget {cal.budget:,} chars" in capsys.readouterr().out
    assert (run / "judge-budget.json").read_text() == before
    # re-scoring at the suite's budget forgets the calibration, so the report never claims it
    assert main(["score", str(run)]) == 0
    assert "judge-budget.json removed" in capsys.readouterr().out and load(run) is None
