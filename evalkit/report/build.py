"""The report itself: the sections in order into ``report.md``, figures beside it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from evalkit.common.files import AtomicWriter, without_surrogates
from evalkit.report.data import load_report_data
from evalkit.report.markdown import folded
from evalkit.report.sections import SECTIONS, as_section, preamble


def render_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike) -> str:
    """The report's Markdown; figures are written into ``out_dir`` as a side effect."""
    data = load_report_data(run_dir)
    out = Path(out_dir)
    sections = [as_section(s) for s in SECTIONS]
    # The figures of every section are drawn on the other cores while the sections go on.
    with data.figures.background(os.cpu_count() or 1):
        bodies = [(s, s.render(data, out)) for s in sections]
    # A section with nothing to say for this run (an empty list: no bank configured) is left out;
    # one whose input is missing says so in its body instead.
    shown = [(s, body) for s, body in bodies if body]
    parts = preamble(data, [s.title for s, _ in shown])
    for s, body in shown:
        parts += [f"## {s.title}", "", *folded(body, s.folded), ""]
    return "\n".join(parts).rstrip() + "\n"


_FIGURE_LINK = re.compile(r"fig-[^\s()<>/\\]*?\.png")


def _figures_named(report: Path) -> set[str]:
    """The figure files a report links to (none when it is absent or unreadable)."""
    try:
        return set(_FIGURE_LINK.findall(report.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return set()


def write_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Write ``report.md`` and its PNG figures into ``out_dir`` (default: the run's ``report/`` folder).

    The run folder is checked before anything is created (:func:`evalkit.contracts.runs.run_folder`)."""
    from evalkit.contracts.runs import RunFolderError, run_folder

    run = run_folder(run_dir)
    if out_dir is not None and not str(out_dir).strip():
        raise RunFolderError("--out '': empty path")
    out = Path(out_dir) if out_dir else run / "report"
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"{out}: not a folder (the report's output folder)")
    path = out / "report.md"
    # Only figures the previous report here linked to are removed when this one does not draw them
    # again: --out may be a folder that holds the user's own fig-*.png files.
    earlier = _figures_named(path)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        # Run folders written before the corpus stage replaced lone surrogates may still hold them.
        text = without_surrogates(render_report(run, out))
    except BaseException as e:
        if created:  # a failed report leaves no folder behind that it made
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        if not isinstance(e, AttributeError | TypeError | KeyError | IndexError):
            raise
        # The readers check each file's top-level shape; a value deeper down of the wrong type
        # (hand-edited, another tool's file) still must not end in a traceback.
        raise RunFolderError(
            f"{run}: a run file (decision.json, config.json, a manifest) holds a value of the wrong "
            f"type ({type(e).__name__}: {e})"
        ) from None
    with AtomicWriter(path) as fh:
        fh.write(text)
    for name in earlier - set(_FIGURE_LINK.findall(text)):
        (out / name).unlink(missing_ok=True)
    return path
