"""One writer per run folder: ``run_lock(root)`` holds an exclusive lock on ``root/.lock`` for
as long as a run writes there, and a second run into the same folder stops at once, naming the
holder (pid, host, start time, command).

The lock is an OS lock (``flock``), so a run killed with SIGKILL releases it with its process and
``--resume`` never meets a stale lock. Where ``fcntl`` is missing, an exclusively created file
whose pid is checked for liveness stands in.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

LOCK_NAME = ".lock"


class RunFolderBusy(ValueError):
    """Another run holds the run folder (a usage error: exit 2)."""


def _holder(path: Path) -> str:
    try:
        h = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        h = {}
    if not h:
        return "another evalkit process (holder unknown)"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(h.get("started", 0)))
    return f"pid {h.get('pid')} on host {h.get('host')} since {since} UTC ({h.get('command', '?')})"


def _busy(root: Path, path: Path) -> RunFolderBusy:
    return RunFolderBusy(
        f"{root}: run folder in use by {_holder(path)}; wait for it to finish or use another --run-dir"
    )


@contextlib.contextmanager
def run_lock(root: str | os.PathLike, command: str = "evalkit run") -> Iterator[None]:
    """Hold ``root``'s run lock for the ``with`` block; RunFolderBusy if another run holds it."""
    root = Path(root)
    if root.is_symlink() and not root.exists():
        # mkdir said only "[Errno 17] File exists".
        raise FileNotFoundError(f"{root}: a symlink to {os.readlink(root)}, which does not exist")
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{root}: not a folder (a run folder is expected)")
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    me = json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": command}
    )
    if fcntl is None:  # pragma: no cover
        yield from _exclusive_file(root, path, me)
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(root, path) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _exclusive_file(root: Path, path: Path, me: str) -> Iterator[None]:  # pragma: no cover
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            pid = json.loads(path.read_text() or "{}").get("pid")
            try:
                if pid:
                    os.kill(int(pid), 0)
                    raise _busy(root, path)
            except ProcessLookupError:
                pass
            path.unlink(missing_ok=True)  # its holder is gone
    else:
        raise _busy(root, path)
    os.write(fd, me.encode())
    os.close(fd)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
