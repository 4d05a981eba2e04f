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

from evalkit.models.cache import BUSY_S, CallCache

_COLUMNS = (
    "key, backend, base_url, model, purpose, replicate, request, response, tokens_in, tokens_out,"
    " latency_s, cost_usd, created_at"
)


def _open(path: Path) -> sqlite3.Connection:
    """A read-only connection to a cache whose ``calls`` table can be read.

    ``mode=ro`` reads a WAL left by a killed writer too; where that cannot open (a read-only
    folder, network storage without shared memory) the file is read as immutable: a shared cache
    is one no process writes while others read it."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such call cache")
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(f"file:{path.resolve()}?{flags}", uri=True)
        try:
            conn.execute("SELECT key FROM calls LIMIT 1").fetchall()
            return conn
        except sqlite3.DatabaseError as e:
            conn.close()
            err = e
    raise ValueError(f"{path}: cannot read the call cache ({err})")


def check_sources(sources: list[str | os.PathLike]) -> None:
    """Raise ValueError naming the first source that is missing or not a readable call cache,
    before anything (a run folder, its lock, the joined cache) is created."""
    for src in map(Path, sources):
        _open(src).close()


def _exclusive(dest: CallCache) -> sqlite3.Connection:
    """``dest``'s connection, switched to a rollback journal, or ValueError if another process
    has the file open (a running run): leaving WAL mode needs every other connection gone, so
    this is asked before anything is written. The joined cache is then one self-contained file to
    copy or share, and a read-only reader of it creates no -wal/-shm beside it (a run's own cache
    turns WAL again when it opens it)."""
    conn = dest._conn()
    conn.execute("PRAGMA busy_timeout=200")
    try:
        conn.execute("PRAGMA journal_mode=DELETE").fetchone()
    except sqlite3.OperationalError as e:
        if "locked" not in str(e):
            raise
        raise ValueError(
            f"{dest.path}: the call cache is open in another process (a running evalkit run?); "
            "merge into another file, or wait until that run ends"
        ) from None
    finally:
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_S * 1000)}")
    return conn


def merge_caches(sources: list[str | os.PathLike], out: str | os.PathLike) -> dict[str, int]:
    """Add every call of ``sources`` to the cache ``out`` (created if absent); returns per source
    how many calls it added that ``out`` did not hold yet. Rows are streamed from each source,
    never all read into memory; a cache another process has open is refused before any write."""
    out = Path(out)
    readers = []
    try:
        for src in map(Path, sources):
            if not (out.exists() and src.resolve() == out.resolve()):
                readers.append((src, _open(src)))  # every source checked before out is touched
        dest = CallCache(out)
        conn = _exclusive(dest)
        added: dict[str, int] = {}
        insert = f"INSERT OR IGNORE INTO calls ({_COLUMNS}) VALUES ({','.join('?' * 13)})"
        for src, reader in readers:
            before = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            conn.execute("BEGIN EXCLUSIVE")
            conn.executemany(insert, reader.execute(f"SELECT {_COLUMNS} FROM calls ORDER BY key"))
            conn.execute("COMMIT")
            added[str(src)] = conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0] - before
    finally:
        for _, reader in readers:
            reader.close()
    conn.close()
    dest._local.conn = None
    return added
