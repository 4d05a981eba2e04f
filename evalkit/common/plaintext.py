"""Plain-text views of messages: what a model would see, in full.

Probes search these views for facts; they are deliberately simple and lossless. The lossy
re-render a compactor sends to its summarizer lives with the compactor, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from evalkit.contracts.session import Compaction, Message, Text, Thinking, ToolCall, ToolResult


def block_plain_text(block) -> str:
    """A block as a model would read it (tool calls as name + JSON args)."""
    if isinstance(block, Text | Thinking):
        return block.text
    if isinstance(block, ToolCall):
        return f"{block.name} {json.dumps(block.args, ensure_ascii=False, sort_keys=True)}"
    if isinstance(block, ToolResult):
        return block.output
    if isinstance(block, Compaction):
        return block.summary
    raise TypeError(f"not a block: {block!r}")


def message_plain_text(msg: Message) -> str:
    """All of a message's blocks, joined by newlines."""
    return "\n".join(block_plain_text(b) for b in msg.blocks)


def context_plain_text(messages: Iterable[Message]) -> str:
    """A whole context as one string (messages separated by blank lines)."""
    return "\n\n".join(message_plain_text(m) for m in messages)
