"""A small Markdown checker for generated reports: broken tables, broken links, stray raw HTML.

It checks what a generator can get wrong and a reader would notice: a table row with a different
number of cells than its header (GitHub then drops or shifts cells), a relative link or image
whose target does not exist, an in-page anchor with no heading, and raw HTML that quoted text
must never produce.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from evalkit.report.markdown import heading_anchor

_FENCE = re.compile(r"^\s*(```|~~~)")
_DELIM_CELL = re.compile(r"^\s*:?-{3,}:?\s*$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"(?<!\\)(!?)\[((?:\\.|[^\]\\])*)\]\((<[^>]*>|[^)\s]*)\)")
_TAG = re.compile(r"(?<!\\)</?([A-Za-z][A-Za-z0-9-]*)[^<>]*>")
ALLOWED_TAGS = {"details", "summary"}


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    # GFM splits on every unescaped pipe, even inside code spans.
    return re.split(r"(?<!\\)\|", s)


def check_markdown(text: str, base_dir: str | os.PathLike) -> list[str]:
    """Problems found in ``text`` (links resolved against ``base_dir``), as ``line N: what`` strings."""
    base = Path(base_dir)
    problems: list[str] = []
    lines = text.split("\n")
    anchors = {heading_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+?)\s*$", text, re.M)}
    in_fence = False
    table_cols: int | None = None
    for i, line in enumerate(lines, 1):
        if _FENCE.match(line):
            in_fence = not in_fence
            table_cols = None
            continue
        if in_fence:
            continue
        is_row = line.lstrip().startswith("|")
        if is_row and table_cols is None:
            header = _cells(line)
            nxt = lines[i] if i < len(lines) else ""
            delim = _cells(nxt) if nxt.lstrip().startswith("|") else []
            if len(delim) != len(header) or not all(_DELIM_CELL.match(c) for c in delim):
                problems.append(f"line {i}: table header without a matching delimiter row")
            table_cols = len(header)
        elif is_row and table_cols is not None:
            if len(_cells(line)) != table_cols:
                problems.append(f"line {i}: table row has {len(_cells(line))} cells, header has {table_cols}")
        elif not is_row:
            table_cols = None
        bare = _CODE_SPAN.sub("", line)
        for m in _LINK.finditer(bare):
            dest = m.group(3).strip("<>")
            kind = "image" if m.group(1) else "link"
            if not dest:
                problems.append(f"line {i}: empty {kind} target")
            elif re.match(r"^[a-z][a-z0-9+.-]*:", dest, re.I):
                continue  # absolute URLs are not checked offline
            elif dest.startswith("#"):
                if dest[1:] not in anchors:
                    problems.append(f"line {i}: anchor {dest} matches no heading")
            elif not (base / dest.split("#", 1)[0]).exists():
                problems.append(f"line {i}: {kind} target {dest} does not exist")
        for m in _TAG.finditer(_LINK.sub("", bare)):
            if m.group(1).lower() not in ALLOWED_TAGS:
                problems.append(f"line {i}: raw HTML <{m.group(1)}>")
    if in_fence:
        problems.append("end: unclosed code fence")
    return problems


def check_file(path: str | os.PathLike) -> list[str]:
    """:func:`check_markdown` on a file, links resolved against its folder."""
    p = Path(path)
    return check_markdown(p.read_text(encoding="utf-8"), p.parent)
