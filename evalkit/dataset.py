"""A canonical corpus as a Hugging Face ``datasets.Dataset`` (and parquet) and back.

One row per session: ``id``, ``format``, ``path``, ``origin``, ``meta`` and ``messages`` as JSON
strings (the message schema is recursive and varied, which Arrow structs represent badly), plus
``n_messages`` for filtering. Round-tripping keeps every field of the canonical session.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from evalkit.session import Session, message_to_dict, session_from_dict


def _row(s: Session) -> dict:
    return {
        "id": s.id,
        "schema": s.schema,
        "format": s.source.format,
        "path": s.source.path,
        "origin": s.source.origin,
        "meta": json.dumps(s.meta, ensure_ascii=False, sort_keys=True),
        "messages": json.dumps([message_to_dict(m) for m in s.messages], ensure_ascii=False),
        "n_messages": len(s.messages),
    }


def to_dataset(sessions: Iterable[Session]):
    """A ``datasets.Dataset`` of sessions, built from a generator (streams into Arrow)."""
    import datasets

    sessions = iter(sessions)

    def gen():
        for s in sessions:
            yield _row(s)

    features = datasets.Features(
        {k: datasets.Value("int64" if k == "n_messages" else "string") for k in ("id", "schema", "format", "path", "origin", "meta", "messages", "n_messages")}
    )
    return datasets.Dataset.from_generator(gen, features=features)


def from_dataset(ds) -> Iterator[Session]:
    """Canonical sessions from a dataset made by :func:`to_dataset` (validated on the way in)."""
    for row in ds:
        yield session_from_dict(
            {
                "schema": row["schema"],
                "id": row["id"],
                "source": {"format": row["format"], "path": row["path"], "origin": row["origin"]},
                "meta": json.loads(row["meta"]),
                "messages": json.loads(row["messages"]),
            }
        )


def export_parquet(corpus: str | os.PathLike, out: str | os.PathLike) -> int:
    """Write a corpus folder's sessions to one parquet file; returns the number of sessions."""
    from evalkit.corpus import read_sessions

    ds = to_dataset(read_sessions(corpus))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    ds.to_parquet(str(out))
    return len(ds)


def import_parquet(path: str | os.PathLike) -> Iterator[Session]:
    """Sessions from a parquet file written by :func:`export_parquet`."""
    import datasets

    yield from from_dataset(datasets.load_dataset("parquet", data_files=str(path), split="train"))
