"""Worker pools whose processes die with their parent.

A run killed during replay (SIGKILL, OOM killer) must not leave workers behind that keep calling
the endpoint. Each worker asks the kernel for SIGKILL when its parent dies (Linux
``PR_SET_PDEATHSIG``) and, everywhere, watches its parent pid from a daemon thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1
POLL_S = 0.5
# Process-wide settings are the application's choice, not the library's: the evalkit command
# registers here what each worker sets up as it starts (evalkit.cli.memory); a library caller
# gets workers with Python's defaults.
_WORKER_SETUP: list[Callable[[], None]] = []


def on_worker_start(fn: Callable[[], None]) -> None:
    """Run ``fn`` (a module-level function, so a worker can import it) in every worker this
    process starts from now on."""
    if fn not in _WORKER_SETUP:
        _WORKER_SETUP.append(fn)


def die_with_parent(parent: int) -> None:
    """Pool initializer: end this process when ``parent`` is gone."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watcher below still covers it
    if os.getppid() != parent:  # the parent died before we got here
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="evalkit-parent-watch", daemon=True).start()


def init_worker(parent: int, setup: tuple[Callable[[], None], ...] = ()) -> None:
    """Pool initializer: die with ``parent``; leave Ctrl-C to it; then what the application registered.

    Ctrl-C reaches every process of the terminal's group: a worker that took it printed its own
    traceback beside the parent's. The parent stops the work and the workers end with it."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The CLI turns SIGTERM into an exception for its clean-up; a forked worker has nothing to
    # clean and would print a traceback: it ends quietly, as by default.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for fn in setup:
        fn()


class _Pool(ProcessPoolExecutor):
    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            # Interrupted: drop the queued jobs instead of waiting for them all.
            self.shutdown(wait=False, cancel_futures=True)
            return False
        return super().__exit__(exc_type, exc, tb)


def worker_pool(max_workers: int) -> ProcessPoolExecutor:
    """A ProcessPoolExecutor whose workers die with this process, leave Ctrl-C to it (and run
    :func:`on_worker_start`'s functions as they start); leaving it on Ctrl-C or SIGTERM cancels
    the jobs not started."""
    return _Pool(
        max_workers=max_workers, initializer=init_worker, initargs=(os.getpid(), tuple(_WORKER_SETUP))
    )


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel ``pool``'s queued jobs and end its workers now (SIGTERM: a worker ends quietly).

    For work that keeps nothing (a simulation): on Ctrl-C its running jobs are not worth waiting
    for, and a worker must not sit in the job queue while a second Ctrl-C arrives."""
    # The executor keeps its processes in a private table (emptied by shutdown); there is no
    # public terminate before Python 3.14's terminate_workers().
    procs = list((getattr(pool, "_processes", None) or {}).values())
    # A second Ctrl-C while the workers end must not cut this short and leave them running.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        # Shut down before ending the workers: the pool's manager thread then drops the cancelled
        # jobs (Executor.map cancels them as Ctrl-C leaves it) before it sees a worker gone. The
        # other way round, Python before 3.12 marks a cancelled job failed, which raises
        # InvalidStateError in that thread: a traceback after Ctrl-C, about one time in twenty.
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(5)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def bounded_map(pool: ProcessPoolExecutor, fn: Callable, jobs: Iterable, window: int) -> Iterator:
    """``pool.map(fn, jobs)`` in order, with at most ``window`` jobs in flight: ``Executor.map``
    takes every job at once and keeps each result that finishes ahead of a slow one, so its
    memory grows with the corpus (~3 MB a session line) where this stays at ``window`` results."""
    pending: deque = deque()
    for job in jobs:
        pending.append(pool.submit(fn, job))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
