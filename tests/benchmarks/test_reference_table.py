"""The side-by-side comparison's medians, ratios and verdicts against #35's limits, on fake numbers."""

from __future__ import annotations

from benchmarks import Figure
from benchmarks.reference import Sample, compare, format_table
from benchmarks.stages import figure_name, flatness


def test_medians_ratios_and_verdicts_against_the_limits():
    ref = [Sample(100.0, 200.0, 3.0), Sample(90.0, 180.0, 3.0), Sample(300.0, 210.0, 3.0)]
    new = [Sample(50.0, 150.0, 0.2), Sample(70.0, 140.0, 0.2), Sample(55.0, 500.0, 0.2)]
    rows = {c.figure: c for c in compare(ref, new, tests=(500.0, 250.0))}
    assert (rows["wall"].ref, rows["wall"].new) == (100.0, 55.0)  # medians, not means
    assert round(rows["wall"].ratio, 3) == 0.55 and rows["wall"].holds
    assert round(rows["cpu"].ratio, 3) == 0.75 and not rows["cpu"].holds  # 150 / 200 > 0.6
    assert round(rows["decision.json"].ratio, 4) == 0.0667 and rows["decision.json"].holds
    assert rows["make test wall"].ratio == 0.5 and rows["make test wall"].holds
    table = format_table(list(rows.values()), "1656aa3", 3, 4)
    assert "medians of 3 alternating run(s) each" in table and "4 sessions" in table
    assert "| cpu | 200.000 s | 150.000 s | 0.750x | <= 0.6x | no |" in table
    assert "| decision.json | 3.000 MB | 0.200 MB | 0.067x | <= 0.1x | yes |" in table


def test_without_make_test_there_is_no_test_row():
    one = [Sample(1.0, 1.0, 1.0)]
    assert [c.figure for c in compare(one, one)] == ["wall", "cpu", "decision.json"]


def test_flatness_compares_the_largest_size_with_the_smallest(monkeypatch):
    monkeypatch.setenv("EVALKIT_BENCH_SCALE_SESSIONS", "50,200,800")
    rows = [
        Figure(figure_name("score", 50, "stage process"), 200.0, "MB"),
        Figure(figure_name("score", 800, "stage process"), 300.0, "MB"),
        Figure(figure_name("replay", 50, "stage process"), 200.0, "MB"),
        Figure(figure_name("replay", 800, "stage process"), 220.0, "MB"),
        Figure(figure_name("decide", 50, "stage process"), 100.0, "MB"),  # no 800 row: no ratio
    ]
    got = {f.figure: (f.value, f.unit) for f in flatness(rows)}
    assert got == {
        "stage replay: peak RSS of the stage process, 800/50 sessions": (1.1, "x (#35: <= 1.2x, holds)"),
        "stage score: peak RSS of the stage process, 800/50 sessions": (
            1.5,
            "x (#35: <= 1.2x, does not hold)",
        ),
    }


def test_the_stages_bench_runs_the_stages_asked_for_and_refuses_unknown_ones(monkeypatch):
    import pytest

    from benchmarks import stages

    monkeypatch.setenv("EVALKIT_BENCH_STAGES", "health, report")
    assert stages._stages() == ["health", "report"]
    monkeypatch.setenv("EVALKIT_BENCH_STAGES", "health,reprot")
    with pytest.raises(ValueError, match="reprot"):
        stages._stages()
    monkeypatch.delenv("EVALKIT_BENCH_STAGES")
    assert stages._stages() == list(stages.STAGES)
