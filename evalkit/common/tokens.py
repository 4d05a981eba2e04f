"""Token estimates, pluggable by name.

The default is ``ceil(chars / 4)`` per message, as the reference harnesses estimate (REFERENCES.md
§1.A); it needs no model files and is what the compaction trigger is specified against. A
tiktoken counter is available where tiktoken and its encoding file are present offline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from evalkit.common.registry import Registry
from evalkit.contracts.session import Message, message_chars

Counter = Callable[[str], int]
TOKENIZERS: Registry[Callable[[], Counter]] = Registry("tokenizer")


@TOKENIZERS.register("chars4", "ceil(chars/4), the reference harnesses' estimate (no files needed)")
def _chars4() -> Counter:
    return lambda text: math.ceil(len(text) / 4)


@TOKENIZERS.register("tiktoken", "tiktoken o200k_base, when tiktoken and its encoding are available offline")
def _tiktoken() -> Counter:
    try:
        import tiktoken
    except ImportError as e:  # optional extra
        raise RuntimeError("tokenizer 'tiktoken' needs `pip install evalkit[tiktoken]`") from e
    try:
        enc = tiktoken.get_encoding("o200k_base")
    except Exception as e:  # the encoding file is fetched on first use; offline that fails
        raise RuntimeError(
            "tokenizer 'tiktoken': encoding o200k_base is not available offline "
            "(set TIKTOKEN_CACHE_DIR to a folder holding it, or use tokenizer = 'chars4')"
        ) from e
    return lambda text: len(enc.encode(text, disallowed_special=()))


def get_counter(name: str = "chars4") -> Counter:
    """The text-to-tokens function registered under ``name``."""
    return TOKENIZERS.get(name)()


def message_tokens(msg: Message, name: str = "chars4") -> int:
    """Tokens of one message. For chars4 this is ceil(chars/4) of the whole message, as specified."""
    if name == "chars4":
        return math.ceil(message_chars(msg) / 4)
    from evalkit.common.plaintext import message_plain_text

    return get_counter(name)(message_plain_text(msg))


def context_tokens(messages: Iterable[Message], name: str = "chars4") -> int:
    """Sum of per-message estimates, the way the reference harness totals a context."""
    return sum(message_tokens(m, name) for m in messages)
