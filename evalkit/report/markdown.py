"""Markdown building blocks and the report itself: sections in order, figures beside ``report.md``."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any


def table(header: list[str], rows: list[list[str]]) -> str:
    """A GFM table; every row must have the header's column count (cells are already escaped)."""
    for r in rows:
        if len(r) != len(header):
            raise ValueError(f"table row has {len(r)} cells, header has {len(header)}: {r}")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def code(text: Any) -> str:
    """An inline code span that survives back-ticks and table pipes in ``text``."""
    s = str(text).replace("\n", " ").replace("|", "\\|")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def fenced(lang: str, text: str) -> list[str]:
    """A fenced code block that ``text`` cannot close (its fence is longer than any back-tick run
    inside), as lines."""
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return [f"{ticks}{lang}", text, ticks]


def name(text: Any) -> str:
    """A metric or arm name as plain text when it is a plain identifier, escaped otherwise."""
    s = str(text)
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]", s):
        return s
    from evalkit.report.escape import escape_inline

    return escape_inline(s)


def num(x: Any, digits: int = 3, signed: bool = False) -> str:
    """A number for a table; ``n/a`` for missing or NaN values (an error is never shown as 0)."""
    if x is None or isinstance(x, bool):
        return "n/a"
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(f):
        return "n/a"
    return f"{f:+.{digits}f}" if signed else f"{f:.{digits}f}"


def pval(p: Any) -> str:
    if p is None:
        return "n/a"
    try:
        f = float(p)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(f):
        return "n/a"
    return "< 0.001" if f < 0.001 else f"{f:.3f}"


def interval(ci: Any, digits: int = 3, signed: bool = True) -> str:
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return "n/a"
    return f"[{num(ci[0], digits, signed)}, {num(ci[1], digits, signed)}]"


def rel_link(target: Path, out_dir: Path) -> str:
    """A link destination for ``target`` relative to the report folder (angle-bracketed if needed)."""
    rel = Path(os.path.relpath(target.resolve(), out_dir.resolve())).as_posix()
    return f"<{rel}>" if re.search(r"[\s()<>]", rel) else rel


def slug(name: str) -> str:
    """A file-name-safe form of a metric or arm name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "x"


def heading_anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return s.replace(" ", "-")


def render_report(run_dir: str | os.PathLike, out_dir: str | os.PathLike) -> str:
    """The report's Markdown; figures are written into ``out_dir`` as a side effect."""
    from evalkit.report.data import load_report_data
    from evalkit.report.sections import SECTIONS, preamble

    data = load_report_data(run_dir)
    out = Path(out_dir)
    parts = preamble(data, [title for title, _ in SECTIONS])
    # The figures of every section are drawn on the other cores while the sections go on.
    with data.figures.background(os.cpu_count() or 1):
        for title, fn in SECTIONS:
            parts += [f"## {title}", "", *fn(data, out), ""]
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
    from evalkit.corpus.io import AtomicWriter, without_surrogates

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
