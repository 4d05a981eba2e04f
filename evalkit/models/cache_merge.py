"""Call caches across machines: every worker or shard writes its own SQLite file (no SQLite writes
over network storage); ``evalkit cache merge A B ... --out C`` joins them, and a read-only shared
cache warms a run's own file before it starts (``evalkit run --warm-cache PATH``).

A call is content-addressed by its request key, so joining is a union: the first file that holds
a key gives its row (a key's answer is the same call wherever it was made).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from evalkit.models.cache import CallCache

_COLUMNS = (
    "key, backend, base_url, model, purpose, replicate, request, response, tokens_in, tokens_out,"
    " latency_s, cost_usd, created_at"
)


def _rows(path: Path) -> list[tuple]:
    """Every call of a cache, read without writing to it."""
    return _read(path, f"SELECT {_COLUMNS} FROM calls ORDER BY key")


def _read(path: Path, sql: str) -> list[tuple]:
    """``sql``'s rows from a cache, read without writing to it; errors name the file.

    ``mode=ro`` reads a WAL left by a killed writer too; where that cannot open (a read-only
    folder, network storage without shared memory) the file is read as immutable: a shared cache
    is one no process writes while others read it."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such call cache")
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(f"file:{path.resolve()}?{flags}", uri=True)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:  # "file is not a database" too, not only locks
            err = e
    raise ValueError(f"{path}: cannot read the call cache ({err})")


def merge_caches(sources: list[str | os.PathLike], out: str | os.PathLike) -> dict[str, int]:
    """Add every call of ``sources`` to the cache ``out`` (created if absent); returns per source
    how many calls it added that ``out`` did not hold yet."""
    for src in map(Path, sources):  # a missing or junk source must not leave an empty cache behind
        _read(src, "SELECT COUNT(*) FROM calls")
    dest = CallCache(out)
    conn = dest._conn()
    added: dict[str, int] = {}
    for src in map(Path, sources):
        if src.resolve() == dest.path.resolve():
            continue
        rows = _rows(src)
        before = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        conn.execute("BEGIN")
        conn.executemany(f"INSERT OR IGNORE INTO calls ({_COLUMNS}) VALUES ({','.join('?' * 13)})", rows)
        conn.execute("COMMIT")
        added[str(src)] = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0] - before
    # Back to a rollback journal: the joined cache is one self-contained file to copy or share, and
    # a read-only reader of it creates no -wal/-shm beside it (a run's own cache turns WAL again
    # when it opens it).
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    dest._local.conn = None
    return added
