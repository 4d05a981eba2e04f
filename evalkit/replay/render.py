"""Re-rendering the head for the summarizer (REFERENCES.md §1.A), with named variants.

``User:`` / ``Assistant:`` lines; tool results as ``[tool result]`` or ``[tool error]`` cut to
their first 2,000 characters with ``… [N more characters truncated]``; thinking cut to 1,000.
The ``head-tail`` variant (seed 000) keeps a long tool result's first 500 and last 1,500
characters plus up to 30 tally or error lines from the elided middle.

Every render also says how many of the message's characters it showed verbatim and how many
its policy elided on purpose, so replay can tell a deliberate cut (``truncated_chars``) from
content that left the view unseen (``lost_chars``). Renders are pure functions of the message,
so one cache per session serves every arm.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.common.textscan import lines_with
from evalkit.common.toolcalls import files_of
from evalkit.contracts.session import Message, Text, Thinking, ToolCall, ToolResult, message_chars

TOOL_RESULT_CHARS = 2_000
THINKING_CHARS = 1_000
HEAD_CHARS, TAIL_CHARS, MIDDLE_LINES = 500, 1_500, 30
STUB_MARKER = "\n[truncated]"

# Lines worth rescuing from an elided middle: a runner's tally or an error (seed 000's evidence).
_TALLY_LINE = re.compile(
    r"\b\d+ (?:passed|failed|passing|failing|pending|errors?|skipped)\b|test result:|^\s*Tests?:\s|"
    r"\bRan \d+ tests?\b|\btests? (?:passed|failed)\b|^(?:ok|FAIL)\s+\S+",
    re.I | re.M,
)
_ERROR_LINE = re.compile(r"\b(?:error|exception|traceback|fatal|failed|FAIL)\b", re.I)


@dataclass(frozen=True, slots=True)
class Rendered:
    """One message as a summarizer reads it, and how much of the original that shows."""

    text: str
    shown: int  # original characters that appear verbatim
    elided: int  # characters the render policy cut on purpose (tool output, thinking, middles)


def cut(text: str, limit: int) -> str:
    """The first ``limit`` characters and a marker naming how many were dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters truncated]"


def _first_n(output: str) -> tuple[str, int]:
    return cut(output, TOOL_RESULT_CHARS), min(len(output), TOOL_RESULT_CHARS)


_TALLY_NEEDLES = (
    "passed",
    "failed",
    "passing",
    "failing",
    "pending",
    "error",
    "skipped",
    "test",
    "ok",
    "fail",
)
_ERROR_NEEDLES = ("error", "exception", "traceback", "fatal", "fail")


def _matching_lines(pattern: re.Pattern, text: str, lowered: str, needles: tuple[str, ...]) -> dict[int, str]:
    """Lines of ``text`` that ``pattern`` matches, by start offset (candidates found by substring)."""
    out: dict[int, str] = {}
    for start, end in lines_with(text, needles, lowered):
        if pattern.search(line := text[start:end]):
            out[start] = line
    return out


def _head_tail(output: str) -> tuple[str, int]:
    if len(output) <= HEAD_CHARS + TAIL_CHARS:
        return output, len(output)
    head, middle, tail = output[:HEAD_CHARS], output[HEAD_CHARS:-TAIL_CHARS], output[-TAIL_CHARS:]
    lowered = middle.lower()
    tallies = _matching_lines(_TALLY_LINE, middle, lowered, _TALLY_NEEDLES)
    errors = {
        k: v
        for k, v in _matching_lines(_ERROR_LINE, middle, lowered, _ERROR_NEEDLES).items()
        if k not in tallies
    }
    # Tallies first (they are the evidence), then the latest error lines, in output order.
    keep_t = sorted(tallies)[-MIDDLE_LINES:]
    room = MIDDLE_LINES - len(keep_t)
    keep_e = sorted(errors)[-room:] if room else []
    kept = [tallies.get(k) or errors[k] for k in sorted(keep_t + keep_e)]
    shown = HEAD_CHARS + TAIL_CHARS + sum(len(x) for x in kept)
    note = f"\n… [{len(middle)} characters elided; {len(kept)} tally/error lines kept:]\n"
    return head + note + "\n".join(kept) + ("\n…\n" if kept else "…\n") + tail, shown


ToolOutputRender = Callable[[str], tuple[str, int]]
VARIANTS: dict[str, ToolOutputRender] = {"default": _first_n, "head-tail": _head_tail}


def args_json(call: ToolCall) -> str:
    """Tool arguments as rendered and counted (sorted keys, so equal calls render equally)."""
    return json.dumps(call.args, ensure_ascii=False, sort_keys=True)


def render_message(msg: Message, variant: str = "default") -> Rendered:
    """One message as the summarizer reads it under a render variant."""
    tool_output = VARIANTS[variant]
    out: list[str] = []
    shown = 0
    for b in msg.blocks:
        if isinstance(b, Text):
            out.append(f"{'User' if msg.role == 'user' else 'Assistant'}: {b.text}")
            shown += len(b.text)
        elif isinstance(b, Thinking):
            out.append(f"Assistant (thinking): {cut(b.text, THINKING_CHARS)}")
            shown += min(len(b.text), THINKING_CHARS)
        elif isinstance(b, ToolCall):
            args = args_json(b)
            out.append(f"Assistant: [tool call] {b.name} {args}")
            shown += len(b.name) + len(args)
        elif isinstance(b, ToolResult):
            text, n = tool_output(b.output)
            out.append(f"{'[tool error]' if b.is_error else '[tool result]'} {text}")
            shown += n
    return Rendered("\n".join(out), shown, max(0, message_chars(msg) - shown))


def stub(rendered: Rendered, room: int) -> Rendered:
    """A rendered message cut to fit ``room`` characters with the ``[truncated]`` marker (seed 003).

    The characters beyond the stub were never shown: they are not policy elision but loss, so
    ``elided`` keeps only the render's own cuts and ``shown`` shrinks to what still fits
    (wrapper characters counted against it, so the estimate errs towards loss).
    """
    keep = max(0, room - len(STUB_MARKER))
    overhead = len(rendered.text) - rendered.shown
    return Rendered(
        rendered.text[:keep] + STUB_MARKER, max(0, min(rendered.shown, keep - overhead)), rendered.elided
    )


class RenderCache:
    """Renders of recorded messages by (id, variant), and the files each one's tool calls read
    and modified, shared by every arm of one session."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], Rendered] = {}
        self._files: dict[str, tuple[list[str], list[str]]] = {}

    def files(self, msg: Message) -> tuple[list[str], list[str]]:
        f = self._files.get(msg.id)
        if f is None:
            read: list[str] = []
            modified: list[str] = []
            for call in msg.tool_calls():
                r, w = files_of(call)
                read += r
                modified += w
            f = self._files[msg.id] = (read, modified)
        return f

    def get(self, msg: Message, variant: str = "default") -> Rendered:
        key = (msg.id, variant)
        r = self._cache.get(key)
        if r is None:
            r = self._cache[key] = render_message(msg, variant)
        return r


def render_head(messages: list[Message], variant: str = "default") -> str:
    """The head (the part being summarized) as one conversation transcript."""
    return "\n\n".join(render_message(m, variant).text for m in messages if m.role != "system")
