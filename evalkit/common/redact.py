"""Secret patterns: API keys, tokens and private keys replaced by ``[REDACTED:<kind>]``.

One table of patterns for every place that writes user data out (importers with ``--redact``,
reports quoting transcripts), so a pattern added here protects them all. Patterns aim at the
common, recognisable shapes (provider key prefixes, PEM blocks, bearer headers, ``key=value``
assignments); they are not a guarantee that nothing secret is left.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any

from evalkit.contracts.session import Compaction, Message, Session, Text, Thinking, ToolCall, ToolResult

# (kind, pattern). Order matters: the PEM block goes first so its body is not matched piecemeal.
PATTERNS: list[tuple[str, re.Pattern]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        ),
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}")),
    ("hf_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("stripe_key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}")),
    # user:password@ in a URL (a base_url with credentials); the host stays readable.
    ("url_credentials", re.compile(r"(?<=://)[^\s/@:]+:[^\s/@]+(?=@)")),
    ("bearer_token", re.compile(r"(?i)(?<=\bBearer )[A-Za-z0-9_\-.=~+/]{20,}")),
    (
        # KEY=value / "api_key": "value" where the name says secret; only the value is replaced.
        "secret_assignment",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])[A-Z0-9_]*(?:API[_-]?KEY|SECRET(?:[_-]?KEY)?|TOKEN|PASSWORD|PASSWD)\b"
            r"[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?P<v>(?=[^\s\"'`]*\d)(?=[^\s\"'`]*[A-Za-z])[A-Za-z0-9_\-+/=.]{12,})(?![A-Za-z0-9(])"
        ),
    ),
]


def redact_text(text: str, counts: Counter | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``; ``counts`` gains one per replacement."""
    for kind, pat in PATTERNS:
        if kind == "secret_assignment":

            def sub(m: re.Match, kind: str = kind) -> str:
                if m.group("v").startswith("[REDACTED"):
                    return m.group(0)
                if counts is not None:
                    counts[kind] += 1
                s, e = m.span("v")
                return m.group(0)[: s - m.start()] + f"[REDACTED:{kind}]" + m.group(0)[e - m.start() :]

            text = pat.sub(sub, text)
            continue
        text, n = pat.subn(f"[REDACTED:{kind}]", text)
        if n and counts is not None:
            counts[kind] += n
    return text


def redact_value(v: Any, counts: Counter | None = None) -> Any:
    """``v`` (str, dict, list, nested) with every string redacted."""
    return _value(v, Counter() if counts is None else counts)


def _value(v: Any, counts: Counter) -> Any:
    if isinstance(v, str):
        return redact_text(v, counts)
    if isinstance(v, dict):
        return {k: _value(x, counts) for k, x in v.items()}
    if isinstance(v, list):
        return [_value(x, counts) for x in v]
    return v


def redact_session(session: Session, counts: Counter) -> Session:
    """A copy of ``session`` with secrets replaced in every text, argument, output and summary."""
    msgs = []
    for m in session.messages:
        blocks = []
        for b in m.blocks:
            if isinstance(b, Text | Thinking):
                b = replace(b, text=redact_text(b.text, counts))
            elif isinstance(b, ToolCall):
                b = replace(b, args=_value(b.args, counts))
            elif isinstance(b, ToolResult):
                b = replace(b, output=redact_text(b.output, counts))
            elif isinstance(b, Compaction):
                b = replace(b, summary=redact_text(b.summary, counts))
            blocks.append(b)
        msgs.append(Message(m.id, m.role, blocks, m.meta))
    return replace(session, messages=msgs, meta=_value(session.meta, counts))
