"""Secret patterns: API keys, tokens and private keys replaced by ``[REDACTED:<kind>]``; people
(home-directory user names, e-mail addresses) replaced by stable placeholders.

One table of patterns for every place that writes user data out (importers with ``--redact``,
reports quoting transcripts), so a pattern added here protects them all. Patterns aim at the
common, recognisable shapes (provider key prefixes, PEM blocks, bearer and basic headers,
``key=value`` assignments); they are not a guarantee that nothing secret is left.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any

from evalkit.contracts.session import (
    Compaction,
    Message,
    Session,
    Source,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
)

# Where a key prefix may start: not inside a word (``task-…`` is no key), but right after an
# underscore (``KEY_sk-…``) or a terminal colour code's final ``m`` (``\x1b[31msk-…``): ``\b``
# missed both.
_S = r"(?:(?<![A-Za-z0-9])|(?<=[0-9\[]m))"
_PEM_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?"

# (kind, pattern). Order matters: the PEM block goes first so its body is not matched piecemeal.
# A pattern with a group named ``v`` replaces only that group (the name of a setting stays).
PATTERNS: list[tuple[str, re.Pattern]] = [
    (
        # A whole block, or (END line cut off: a truncated paste) the BEGIN line and the base64
        # lines that follow it (real or JSON-escaped line breaks), up to the first line that is not.
        "private_key",
        re.compile(
            rf"-----BEGIN {_PEM_LABEL}-----(?:[\s\S]*?-----END {_PEM_LABEL}-----"
            r"|(?:(?:\s|\\[rn])+[A-Za-z0-9+/=]{2,}(?=\s|\\[rn]|$))*)"
        ),
    ),
    ("anthropic_key", re.compile(_S + r"sk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai_key", re.compile(_S + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("github_token", re.compile(_S + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})")),
    ("gitlab_token", re.compile(_S + r"glpat-[A-Za-z0-9_\-]{20,}")),
    ("npm_token", re.compile(_S + r"npm_[A-Za-z0-9]{36,}")),
    ("aws_access_key", re.compile(_S + r"(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    (
        # The 40-character secret that goes with an AKIA id, in the ini and the environment spelling.
        "aws_secret_key",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])aws_?secret_?access_?key[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
    ),
    ("google_api_key", re.compile(_S + r"AIza[0-9A-Za-z_\-]{35}")),
    ("slack_token", re.compile(_S + r"xox[abprs]-[A-Za-z0-9\-]{10,}")),
    (
        "slack_webhook",
        re.compile(r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{8,}"),
    ),
    ("hf_token", re.compile(_S + r"hf_[A-Za-z0-9]{30,}")),
    ("stripe_key", re.compile(_S + r"[rs]k_(?:live|test)_[A-Za-z0-9]{20,}")),
    ("jwt", re.compile(_S + r"eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}")),
    # user:password@ in a URL (a base_url with credentials); the host stays readable. The password
    # may hold '/' and '@' (unencoded): it ends at the first '@' a host and the URL's next part
    # follow; a "host:port/path@x" is not taken for one.
    (
        "url_credentials",
        re.compile(
            r"(?<=://)[^\s/@:]+:(?!\d{1,5}(?:/|$))\S*?(?=@[A-Za-z0-9.\-\[\]]+(?::\d+)?(?:[/?#\s\"'<>]|$))"
        ),
    ),
    ("bearer_token", re.compile(r"(?i)(?<=\bBearer )[A-Za-z0-9_\-.=~+/]{20,}")),
    (
        "basic_auth",
        re.compile(
            r"(?i)\bAuthorization[\"']?[ \t]*[:=][ \t]*[\"']?Basic[ \t]+(?P<v>[A-Za-z0-9+/]{6,}={0,2})"
        ),
    ),
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

# People. A home folder's user name (/Users/ana, /home/ana, C:\Users\ana) and an e-mail address
# become ``user-N`` and ``email-N@redacted.invalid``: the same person gets the same placeholder
# throughout one redaction (paths still line up across sessions), and nothing of the name is kept.
_HOME = re.compile(
    r"(?P<pre>(?:/Users/|/home/|[A-Za-z]:\\+Users\\+))(?P<name>[A-Za-z0-9._\-]*[A-Za-z0-9_\-])"
)
_NOT_PEOPLE = {"Shared", "shared", "Public"}
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b"
)
_PLACEHOLDER = re.compile(r"user-\d+|email-\d+@redacted\.invalid")


def _secrets(text: str, counts: Counter | None) -> str:
    for kind, pat in PATTERNS:
        if "v" in pat.groupindex:

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


def _people(text: str, counts: Counter | None, people: dict[str, str]) -> str:
    def placeholder(kind: str, value: str, fmt: str) -> str:
        key = f"{kind}:{value.lower() if kind == 'email' else value}"
        if key not in people:
            people[key] = fmt.format(sum(k.startswith(kind + ":") for k in people) + 1)
        if counts is not None:
            counts[kind] += 1
        return people[key]

    def home(m: re.Match) -> str:
        name = m.group("name")
        if name in _NOT_PEOPLE or _PLACEHOLDER.fullmatch(name):
            return m.group(0)
        return m.group("pre") + placeholder("home_user", name, "user-{}")

    def email(m: re.Match) -> str:
        if _PLACEHOLDER.fullmatch(m.group(0)):
            return m.group(0)
        return placeholder("email", m.group(0), "email-{}@redacted.invalid")

    return _EMAIL.sub(email, _HOME.sub(home, text))


def redact_text(text: str, counts: Counter | None = None, people: dict[str, str] | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``; ``counts`` gains one per replacement.

    With ``people`` (a mapping kept across one redaction, e.g. one import), home-folder user names
    and e-mail addresses are replaced too, each by its stable placeholder."""
    text = _secrets(text, counts)
    return text if people is None else _people(text, counts, people)


def redact_value(v: Any, counts: Counter | None = None, people: dict[str, str] | None = None) -> Any:
    """``v`` (str, dict, list, nested) with every string redacted, dict keys included."""
    return _value(v, Counter() if counts is None else counts, people)


def _value(v: Any, counts: Counter, people: dict[str, str] | None = None) -> Any:
    if isinstance(v, str):
        return redact_text(v, counts, people)
    if isinstance(v, dict):
        # A key can be the secret itself ({"sk-…": "prod"} in a tool's arguments).
        return {_value(k, counts, people): _value(x, counts, people) for k, x in v.items()}
    if isinstance(v, list):
        return [_value(x, counts, people) for x in v]
    return v


def redact_session(session: Session, counts: Counter, people: dict[str, str] | None = None) -> Session:
    """A copy of ``session`` with secrets and people replaced everywhere a user's text can be:
    texts, arguments, outputs, summaries, and the ids, file names and meta that travel with them.

    ``people`` keeps placeholders stable across the sessions of one import (a new mapping per
    session when not given)."""
    people = {} if people is None else people

    def t(s: str) -> str:
        return redact_text(s, counts, people)

    msgs = []
    for m in session.messages:
        blocks = []
        for b in m.blocks:
            if isinstance(b, Text | Thinking):
                b = replace(b, text=t(b.text))
            elif isinstance(b, ToolCall):
                b = replace(b, id=t(b.id), name=t(b.name), args=_value(b.args, counts, people))
            elif isinstance(b, ToolResult):
                b = replace(b, call_id=t(b.call_id), output=t(b.output))
            elif isinstance(b, Compaction):
                b = replace(b, summary=t(b.summary))
            blocks.append(b)
        msgs.append(Message(t(m.id), m.role, blocks, _value(m.meta, counts, people)))
    src = Source(session.source.format, t(session.source.path), t(session.source.origin))
    return replace(
        session, id=t(session.id), source=src, messages=msgs, meta=_value(session.meta, counts, people)
    )
