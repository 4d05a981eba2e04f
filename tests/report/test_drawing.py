"""The report's figure drawer: paths at once, figures written on leaving, failures raised."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalkit.report.drawing import FigureDrawer


def _write(path: Path, text: str) -> Path:
    path.write_text(f"{text} by {os.getpid()}")
    return path


def _fail(path: Path) -> Path:
    raise ValueError(f"cannot draw {path.name}")


def _elsewhere(path: Path) -> Path:
    return path.with_name("other.png")


def test_figures_are_drawn_by_workers_and_written_on_leaving(tmp_path):
    drawer = FigureDrawer()
    assert drawer.draw(_write, tmp_path / "here.txt", "a") == tmp_path / "here.txt"
    assert (tmp_path / "here.txt").read_text() == f"a by {os.getpid()}"  # no pool: drawn at once
    with drawer.background(2):
        paths = [drawer.draw(_write, tmp_path / f"f{i}.txt", str(i)) for i in range(5)]
    assert paths == [tmp_path / f"f{i}.txt" for i in range(5)]
    texts = [p.read_text() for p in paths]
    assert [t.split(" by ")[0] for t in texts] == ["0", "1", "2", "3", "4"]
    assert all(t.split(" by ")[1] != str(os.getpid()) for t in texts)  # in worker processes
    drawer.draw(_write, tmp_path / "after.txt", "b")  # the pool is gone: drawn here again
    assert (tmp_path / "after.txt").read_text() == f"b by {os.getpid()}"


def test_a_failed_figure_is_raised_and_the_drawer_still_works(tmp_path):
    drawer = FigureDrawer()
    with pytest.raises(ValueError, match=r"cannot draw bad\.png"), drawer.background(2):
        drawer.draw(_write, tmp_path / "good.txt", "g")
        drawer.draw(_fail, tmp_path / "bad.png")
    with (
        pytest.raises(RuntimeError, match=r"meant for .*x\.png was written to .*other\.png"),
        drawer.background(2),
    ):
        drawer.draw(_elsewhere, tmp_path / "x.png")
    with drawer.background(2):
        drawer.draw(_write, tmp_path / "again.txt", "c")
    assert (tmp_path / "again.txt").read_text().startswith("c by ")
