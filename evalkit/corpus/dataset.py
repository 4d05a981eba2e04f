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

from evalkit.contracts.session import Session, message_to_dict, session_from_dict


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


FEATURES = {
    "id": "string",
    "schema": "string",
    "format": "string",
    "path": "string",
    "origin": "string",
    "meta": "string",
    "messages": "string",
    "n_messages": "int64",
}


def to_dataset(sessions: Iterable[Session], chunk: int = 1000):
    """A ``datasets.Dataset`` of sessions, built ``chunk`` rows at a time (Arrow holds the rest)."""
    import datasets

    features = datasets.Features({k: datasets.Value(v) for k, v in FEATURES.items()})
    parts, rows = [], []
    for s in sessions:
        rows.append(_row(s))
        if len(rows) >= chunk:
            parts.append(datasets.Dataset.from_list(rows, features=features))
            rows = []
    if rows or not parts:
        parts.append(datasets.Dataset.from_list(rows, features=features))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


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
    from evalkit.corpus.io import read_sessions

    ds = to_dataset(read_sessions(corpus))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    ds.to_parquet(str(out))
    return len(ds)


def import_parquet(path: str | os.PathLike) -> Iterator[Session]:
    """Sessions from a parquet file written by :func:`export_parquet`."""
    import datasets

    yield from from_dataset(datasets.load_dataset("parquet", data_files=str(path), split="train"))
