"""Markdown building blocks the report's sections share: tables, code spans, numbers, links.

The report itself (sections in order) is assembled in :mod:`evalkit.report.build`."""

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


def merge_same_rows(rows: list[list[str]], sep: str = " = ") -> list[list[str]]:
    """Rows that differ only in their first cell (arms with the same numbers) as one row whose first
    cell names them all (``a = b``), in the order they first appear: a per-arm table then shows each
    distinct result once."""
    merged: dict[tuple[str, ...], list[str]] = {}
    for r in rows:
        key = tuple(r[1:])
        if key in merged:
            merged[key][0] += f"{sep}{r[0]}"
        else:
            merged[key] = list(r)
    return list(merged.values())


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


def folded(lines: list[str], fold: bool = True) -> list[str]:
    """``lines`` inside a ``<details>`` block (GitHub renders Markdown inside it after a blank line)."""
    if not fold or not lines:
        return lines
    return ["<details><summary>Show</summary>", "", *lines, "", "</details>"]
