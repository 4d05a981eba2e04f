"""The persistent model-call cache: one SQLite file, content-addressed by the request key.

Only successful answers are stored: an error is retried by the next run instead of replayed.
Several processes write the same file (replay runs sessions in a process pool), so the database
runs in WAL mode with a busy timeout, and every write is its own short transaction: a run killed
mid-way loses at most the calls that were in flight.

A small ``inflight`` table is the cross-process single-flight guard: the first process to claim a
key sends the call; others that want the same key wait for its row instead of sending it again.
A claim whose process is gone (or older than ``stale_s``) is taken over.

Requests and responses are stored zlib-compressed (a BLOB; rows written as TEXT by older versions
are read as they are): a summarizer request holds the whole context window, and uncompressed the
cache of a run was 8.7 times the size of its corpus.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import random
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evalkit.models.backends import StoreFailed
from evalkit.models.request import ChatRequest, ChatResponse

BUSY_S = 30.0  # how long a statement waits for another process's lock on the file
# Space reserved next to the cache while calls are sent (a "ballast" file, per process): freed at
# the first "disk full", so the answers already on the wire can still be stored (paid for once)
# while the run stops. Per answer in flight: a stored row (request and answer, compressed) is
# tens of KB for a context window; plus room for SQLite's write-ahead log.
BALLAST_PER_CALL = 256 << 10
BALLAST_BASE = 1 << 20

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key        TEXT PRIMARY KEY,
    backend    TEXT NOT NULL,
    base_url   TEXT NOT NULL,
    model      TEXT NOT NULL,
    purpose    TEXT NOT NULL,
    replicate  INTEGER NOT NULL,
    request    TEXT NOT NULL,
    response   TEXT NOT NULL,
    tokens_in  INTEGER,
    tokens_out INTEGER,
    latency_s  REAL,
    cost_usd   REAL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS inflight (
    key        TEXT PRIMARY KEY,
    pid        INTEGER NOT NULL,
    started_at REAL NOT NULL
);
"""


def pack(text: str) -> bytes:
    """A request or response as stored: its JSON, zlib-compressed."""
    return zlib.compress(text.encode("utf-8"), 6)


def unpack(value: bytes | str) -> str:
    """The JSON of a stored request or response (a TEXT value: a row of an older version)."""
    return zlib.decompress(value).decode("utf-8") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class CacheStats:
    path: str
    calls: int
    by_backend_model: list[tuple[str, str, int, int, int, float]]  # backend, model, calls, in, out, cost
    bytes: int


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CallCache:
    """Thread- and process-safe store of model calls. One connection per thread (and per process)."""

    def __init__(self, path: str | os.PathLike, stale_s: float = 600.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stale_s = stale_s
        self._local = threading.local()
        self._ballast: Path | None = None
        self._ballast_lock = threading.Lock()
        try:
            self._create_tables()
        except sqlite3.DatabaseError as e:
            # A truncated or foreign file: a data error naming the file, not a traceback.
            raise ValueError(
                f"{self.path}: not a usable call cache ({e}); move it away or set [model] cache_path"
            ) from None

    def _create_tables(self) -> None:
        """Create the tables, waiting while another process opens the same new file.

        A run's workers open the cache at the same moment. On a new file, switching it to WAL
        mode and creating the tables need its write lock, and SQLite answers "database is locked"
        at once, without the busy timeout, where waiting could deadlock: 21 of 200 rounds of four
        processes opening one new file failed that way. So those steps are retried, each time on
        a new connection, within the busy timeout (none of 300 rounds of four or eight failed)."""
        deadline = time.monotonic() + BUSY_S
        while True:
            try:
                self._conn().executescript(f"BEGIN IMMEDIATE;\n{SCHEMA}COMMIT;")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() >= deadline:
                    raise
                conn = getattr(self._local, "conn", None)
                if conn is not None:
                    conn.close()  # rolls back whatever the failed attempt began
                    self._local.conn = None
                time.sleep(random.uniform(0.01, 0.05))

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            # isolation_level=None: autocommit, each statement is its own transaction.
            conn = sqlite3.connect(self.path, timeout=BUSY_S, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_S * 1000)}")
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def get(self, key: str) -> ChatResponse | None:
        row = self._conn().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            body = json.loads(unpack(row[0]))
            if not isinstance(body, dict):
                raise TypeError(f"a JSON {type(body).__name__}, not an object")
            resp = ChatResponse.from_dict(body)
        except (ValueError, TypeError, RecursionError, zlib.error) as e:
            # A hand-edited or foreign row: named, not a traceback, and not silently paid again.
            raise ValueError(
                f"{self.path}: cached response of call {key[:16]} is unreadable ({e}); "
                "remove that row or the file to ask the model again"
            ) from None
        if not resp.ok:
            return None  # a cut-off or failed answer (written by an older version) is never trusted
        resp.cached = True
        return resp

    def put(self, key: str, request: ChatRequest, response: ChatResponse, base_url: str = "") -> None:
        """Store a successful answer (errors are never stored: the next run retries them)."""
        if not response.ok:
            return
        body = response.to_dict()
        body["cached"] = False
        try:
            self._insert(key, request, response, base_url, body)
        except sqlite3.Error as e:  # "database or disk is full" names no file
            if not self.release_ballast():
                raise StoreFailed(
                    f"{self.path}: cannot store a paid answer ({e}); free space, then rerun with --resume"
                ) from None
            # The reserved space is free now: this answer, and those still on the wire, are
            # stored; the run stops here all the same (nothing more is sent).
            try:
                self._insert(key, request, response, base_url, body)
            except sqlite3.Error:
                raise StoreFailed(
                    f"{self.path}: cannot store a paid answer ({e}); free space, then rerun with --resume"
                ) from None
            self.release(key)
            raise StoreFailed(
                f"{self.path}: disk full ({e}); the answers already paid for are stored; "
                "free space, then rerun with --resume"
            ) from None
        self.release(key)

    # -- reserved space for the answers in flight ------------------------------------------------
    def reserve(self, calls: int) -> None:
        """Reserve room for ``calls`` answers in flight (once per process), before sending."""
        with self._ballast_lock:
            if self._ballast is not None:
                return
            # Hidden, and not named like the cache: nothing counting "model-calls.sqlite*" sees it.
            for old in self.path.parent.glob(f".{self.path.name}.ballast-*"):
                pid = old.name.rsplit("-", 1)[-1]
                if pid.isdigit() and not _alive(int(pid)):  # left by a process that died
                    old.unlink(missing_ok=True)
            path = self.path.with_name(f".{self.path.name}.ballast-{os.getpid()}")
            size = BALLAST_BASE + max(1, calls) * BALLAST_PER_CALL
            try:
                with open(path, "wb") as fh:
                    os.posix_fallocate(fh.fileno(), 0, size)
            except OSError as e:
                path.unlink(missing_ok=True)
                raise StoreFailed(
                    f"{path}: cannot reserve {size:,} bytes beside the call cache for the answers in "
                    f"flight ({e.strerror or e}); free space, then rerun"
                ) from None
            self._ballast = path
            atexit.register(path.unlink, missing_ok=True)

    def release_ballast(self) -> bool:
        """Free the reserved space; True if there was some to free."""
        with self._ballast_lock:
            path, self._ballast = self._ballast, None
        if path is None:
            return False
        path.unlink(missing_ok=True)
        return True

    def _insert(
        self, key: str, request: ChatRequest, response: ChatResponse, base_url: str, body: dict
    ) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                key,
                response.backend,
                base_url,
                request.model,
                request.purpose,
                request.replicate,
                pack(request.canonical()),
                pack(json.dumps(body, sort_keys=True, ensure_ascii=False)),
                response.usage.get("prompt_tokens"),
                response.usage.get("completion_tokens"),
                response.latency_s,
                response.cost_usd,
                time.time(),
            ),
        )

    def delete(self, key: str) -> None:
        """Forget one answer (a reply the caller found unusable must not be replayed)."""
        self._conn().execute("DELETE FROM calls WHERE key = ?", (key,))

    # -- cross-process single-flight -------------------------------------------------------------
    def claim(self, key: str) -> bool:
        """True if this process may send the call for ``key`` now; False if another live process
        claimed it first (then :meth:`wait` for its answer)."""
        c = self._conn()
        now = time.time()
        cur = c.execute("INSERT OR IGNORE INTO inflight VALUES (?,?,?)", (key, os.getpid(), now))
        if cur.rowcount == 1:
            return True
        row = c.execute("SELECT pid, started_at FROM inflight WHERE key = ?", (key,)).fetchone()
        if row is None:
            return self.claim(key)
        pid, started = row
        if pid == os.getpid():
            return True  # threads of one process are already single-flighted by the client
        if not _alive(pid) or now - started > self.stale_s:
            cur = c.execute(
                "UPDATE inflight SET pid = ?, started_at = ? WHERE key = ? AND pid = ?",
                (os.getpid(), now, key, pid),
            )
            return cur.rowcount == 1 or self.claim(key)
        return False

    def release(self, key: str) -> None:
        # On a full disk the claim stays until this process ends (then it is taken over); the
        # error that matters (the answer not stored) is raised by the caller.
        with contextlib.suppress(sqlite3.OperationalError):
            self._conn().execute("DELETE FROM inflight WHERE key = ? AND pid = ?", (key, os.getpid()))

    def wait(self, key: str, poll_s: float = 0.05) -> ChatResponse | None:
        """Wait while another process holds the claim; its answer, or None if it gave up."""
        c = self._conn()
        while True:
            hit = self.get(key)
            if hit is not None:
                return hit
            row = c.execute("SELECT pid, started_at FROM inflight WHERE key = ?", (key,)).fetchone()
            if row is None or not _alive(row[0]) or time.time() - row[1] > self.stale_s:
                return self.get(key)
            time.sleep(poll_s)

    # -- maintenance -------------------------------------------------------------------------
    def stats(self) -> CacheStats:
        c = self._conn()
        n = c.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        rows = c.execute(
            "SELECT backend, model, COUNT(*), COALESCE(SUM(tokens_in),0), COALESCE(SUM(tokens_out),0),"
            " COALESCE(SUM(cost_usd),0) FROM calls GROUP BY backend, model ORDER BY backend, model"
        ).fetchall()
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return CacheStats(str(self.path), n, [tuple(r) for r in rows], size)

    def prune(
        self, older_than_s: float | None = None, backend: str | None = None, model: str | None = None
    ) -> int:
        """Delete the matching calls; returns how many. Stale in-flight claims go too."""
        where, args = [], []
        if older_than_s is not None:
            where.append("created_at < ?")
            args.append(time.time() - older_than_s)
        if backend:
            where.append("backend = ?")
            args.append(backend)
        if model:
            where.append("model = ?")
            args.append(model)
        sql = "DELETE FROM calls" + (" WHERE " + " AND ".join(where) if where else "")
        c = self._conn()
        n = c.execute(sql, args).rowcount
        c.execute("DELETE FROM inflight WHERE started_at < ?", (time.time() - self.stale_s,))
        c.execute("VACUUM")
        return n

    def export(self) -> Iterator[dict]:
        """Every call as a plain dict (request and response parsed), oldest first."""
        cur = self._conn().execute(
            "SELECT key, backend, base_url, model, purpose, replicate, request, response, created_at"
            " FROM calls ORDER BY created_at, key"
        )
        for key, backend, base_url, model, purpose, rep, req, resp, created in cur:
            yield {
                "key": key,
                "backend": backend,
                "base_url": base_url,
                "model": model,
                "purpose": purpose,
                "replicate": rep,
                "created_at": created,
                "request": json.loads(unpack(req)),
                "response": json.loads(unpack(resp)),
            }

    def output_lengths(self, model: str, base_url: str, per_purpose: int = 200) -> dict[str, list[int]]:
        """The answer lengths (completion tokens) of up to ``per_purpose`` of the latest stored
        calls of ``model`` at ``base_url``, by purpose (summarize, answer, judge...)."""
        out: dict[str, list[int]] = {}
        rows = self._conn().execute(
            "SELECT purpose, tokens_out FROM calls WHERE model = ? AND base_url = ? AND tokens_out IS NOT NULL"
            " ORDER BY created_at DESC",
            (model, base_url),
        )
        for purpose, n in rows:
            got = out.setdefault(purpose, [])
            if len(got) < per_purpose:
                got.append(int(n))
        return out

    def keys(self) -> set[str]:
        return {r[0] for r in self._conn().execute("SELECT key FROM calls")}
