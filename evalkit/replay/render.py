"""The reference re-render of the head for the summarizer (REFERENCES.md §1.A).

``User:`` / ``Assistant:`` lines; tool results as ``[tool result]`` or ``[tool error]`` cut to
their first 2,000 characters with ``… [N more characters truncated]``; thinking cut to 1,000.
"""

from __future__ import annotations

import json

from evalkit.session import Message, Text, Thinking, ToolCall, ToolResult

TOOL_RESULT_CHARS = 2_000
THINKING_CHARS = 1_000


def cut(text: str, limit: int) -> str:
    """The first ``limit`` characters and a marker naming how many were dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters truncated]"


def render_message(msg: Message, tool_result_chars: int = TOOL_RESULT_CHARS) -> str:
    """One message as the summarizer reads it."""
    out = []
    for b in msg.blocks:
        if isinstance(b, Text):
            out.append(f"{'User' if msg.role == 'user' else 'Assistant'}: {b.text}")
        elif isinstance(b, Thinking):
            out.append(f"Assistant (thinking): {cut(b.text, THINKING_CHARS)}")
        elif isinstance(b, ToolCall):
            out.append(
                f"Assistant: [tool call] {b.name} {json.dumps(b.args, ensure_ascii=False, sort_keys=True)}"
            )
        elif isinstance(b, ToolResult):
            tag = "[tool error]" if b.is_error else "[tool result]"
            out.append(f"{tag} {cut(b.output, tool_result_chars)}")
    return "\n".join(out)


def render_head(messages: list[Message]) -> str:
    """The head (the part being summarized) as one conversation transcript."""
    return "\n\n".join(render_message(m) for m in messages if m.role != "system")
