"""The report itself: the sections in order into ``report.md``, figures beside it."""

from __future__ import annotations

import os
from pathlib import Path

from evalkit.report.data import load_report_data
from evalkit.report.sections import SECTIONS, preamble


def render_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike) -> str:
    """The report's Markdown; figures are written into ``out_dir`` as a side effect."""
    data = load_report_data(run_dir)
    out = Path(out_dir)
    parts = preamble(data, [title for title, _ in SECTIONS])
    # The figures of every section are drawn on the other cores while the sections go on.
    with data.figures.background(os.cpu_count() or 1):
        for title, fn in SECTIONS:
            parts += [f"## {title}", "", *fn(data, out), ""]
    return "\n".join(parts).rstrip() + "\n"


def write_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Write ``report.md`` and its PNG figures into ``out_dir`` (default: the run's ``report/`` folder)."""
    out = Path(out_dir) if out_dir else Path(run_dir) / "report"
    out.mkdir(parents=True, exist_ok=True)
    # Figures of an earlier report in the same folder (other metrics, other arms) must not linger.
    for old in out.glob("fig-*.png"):
        old.unlink()
    path = out / "report.md"
    text = render_report(run_dir, out)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
