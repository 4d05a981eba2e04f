"""Making transcript text safe to quote in a Markdown report.

Session text is data, never markup: a summary that contains ``<script>``, a table row, a link or
a heading must show up as those characters, not change the report. Secrets are redacted by
pattern before anything is shown, and excerpts are cut short after redaction so a key can never
be half-shown.
"""

from __future__ import annotations

import re

from evalkit.common.redact import redact_text


def redact(text: str) -> str:
    """``text`` with API keys, tokens and private keys replaced (one pattern table: evalkit.common.redact)."""
    return redact_text(text)


_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Every character that can open Markdown syntax mid-line (GFM): emphasis, code, links, tables,
# strikethrough, images, autolinks via angle brackets (handled by _HTML), raw HTML.
_INLINE = re.compile(r"([\\`*_\[\]|~!#])")
# Characters that only matter at the start of a line: list markers, ordered-list numbers.
_LEADING = re.compile(r"^(\s*\d*)([-+=.)])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
# A terminal escape sequence (colours, cursor moves) in a captured tool output, removed whole: with
# only its ESC removed, "[31m" would stay glued to the text it coloured.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def strip_controls(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (newlines and tabs kept)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def escape_inline(text: str) -> str:
    """One line of plain text that renders literally in Markdown, including inside a table cell.

    Newlines become `` ⏎ `` so a quoted multi-line text cannot start a block (heading, list,
    quote, table, fence). ``@`` gets a word joiner so quoting a transcript never pings anyone in
    a pull-request comment.
    """
    text = strip_controls(text.replace("\r\n", "\n").replace("\t", " "))
    text = " ⏎ ".join(line.strip() for line in text.split("\n") if line.strip())
    text = "".join(_HTML.get(c, c) for c in text)
    text = _INLINE.sub(r"\\\1", text)
    text = _LEADING.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
    return text.replace("@", "@\u2060")


def excerpt(text: str, limit: int = 160) -> str:
    """A short, redacted, escaped quote of ``text`` (cut at ``limit`` characters, marked with …).

    Control characters go before redacting: a key split by a NUL or BEL would otherwise pass the
    patterns and show re-joined once they are stripped."""
    text = redact(strip_controls(text)).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return escape_inline(text)
