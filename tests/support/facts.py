"""Small builders the fact-extractor tests share: a session from messages, the constraint rules of
a text, the identifiers of one kind."""

from __future__ import annotations

from evalkit.contracts.session import Message, Session, Source
from evalkit.facts.constraints import constraint_sentences


def session_of(*msgs: Message) -> Session:
    """A one-source session holding ``msgs`` in order."""
    return Session("s", Source("test"), list(msgs))


def rules_of(text: str, **kw) -> list[str]:
    """The constraint sentences the extractor takes from ``text`` (without their classes)."""
    return [r for r, _ in constraint_sentences(text, **kw)]


def ids_of(facts, kind: str) -> set[str]:
    """The values of ``facts``' identifiers of ``kind``."""
    return {i.value for i in facts.identifiers if i.kind == kind}


def aider_session(tmp_path, text: str) -> Session:
    """The one session of an aider chat history holding ``text`` (written under ``tmp_path``)."""
    from evalkit.importers import import_paths

    p = tmp_path / ".aider.chat.history.md"
    p.write_text(text)
    (s,), _ = import_paths([p])
    return s
