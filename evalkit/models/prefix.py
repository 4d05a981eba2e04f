"""How much of a set of prompts is a prefix another prompt shares (what a provider can cache).

Providers cache prompt prefixes in blocks (OpenAI: the first 1,024 tokens, then 128-token steps),
keyed by the exact bytes from the start of the prompt. A prompt is therefore cut into fixed blocks
of characters and each block is identified by a hash chained over every block before it: two
prompts share their first k blocks exactly when their k-th chain hashes are equal.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from evalkit.models.request import ChatRequest

BLOCK_CHARS = 512  # ~128 tokens at 4 characters a token: the provider's cache step


def prompt_text(request: ChatRequest) -> str:
    """The request as the provider tokenizes it, in order: tools, then each message's role and text."""
    parts = [json.dumps(list(request.tools), sort_keys=True)] if request.tools else []
    for m in request.messages:
        content = m.get("content")
        text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
        parts.append(f"<{m.get('role', '')}>{text or ''}")
    return "\n".join(parts)


def chain(text: str, block: int = BLOCK_CHARS) -> Iterator[bytes]:
    """One hash per whole block of ``text``, each over the block and every block before it."""
    h = hashlib.blake2b(digest_size=16)
    data = text.encode("utf-8", "surrogatepass")
    for i in range(0, len(data) - block + 1, block):
        h.update(data[i : i + block])
        yield h.copy().digest()


@dataclass
class PrefixIndex:
    """Prompts in the order they are sent: per prompt, the characters of its prefix already sent
    by an earlier prompt (a provider's cache hit, if the cache lives that long), and after all are
    added, the characters it shares with any other prompt."""

    block: int = BLOCK_CHARS
    _seen: set[bytes] = field(default_factory=set)
    _counts: Counter = field(default_factory=Counter)
    _chains: list[list[bytes]] = field(default_factory=list)

    def add(self, text: str) -> int:
        """Record a prompt; returns how many of its leading characters an earlier prompt sent."""
        hashes = list(chain(text, self.block))
        reused = 0
        for h in hashes:
            if h not in self._seen:
                break
            reused += 1
        self._seen.update(hashes)
        self._counts.update(hashes)
        self._chains.append(hashes)
        return reused * self.block

    def shared(self, i: int) -> int:
        """Characters of prompt ``i``'s prefix that at least one other prompt also starts with."""
        n = 0
        for h in self._chains[i]:
            if self._counts[h] < 2:
                break
            n += 1
        return n * self.block
