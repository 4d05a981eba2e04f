"""Process-wide memory and collector settings of the ``evalkit`` command (:func:`tune_process`).

They live here, not in the library: a notebook or a Ray worker importing evalkit keeps its own
process settings. Returning freed memory to the OS between pipeline stages:

Each stage frees what it built (the metrics table, event indexes), but the allocators keep freed
pages for reuse: Arrow's pool (mimalloc) and glibc's malloc arenas. The next stage then stands on
them, so the run's peak was the sum of the stages' leftovers rather than the largest stage
(measured at 150 sessions: after scoring, 280 MB RSS with 0 bytes allocated in Arrow; 157 MB once
both allocators gave their free pages back).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
from functools import cache


@cache
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None  # glibc only (not musl)
    except OSError:
        return None


def use_system_allocator() -> None:
    """Have Arrow allocate from glibc's malloc instead of its bundled mimalloc (this process and
    the workers it forks after the call).

    mimalloc keeps a heap per thread and holds freed segments, so a stage that reads a metrics
    file a row group at a time kept its high-water mark: walking a 243,000-row file (200 sessions,
    30 row groups) a run of sessions at a time raised RSS by 92 MB under mimalloc and by 43 MB
    under glibc (the rows a run holds are ~12 MB in Arrow). glibc's free pages also go back with
    :func:`release_freed`."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def release_freed() -> None:
    """Give the pages Arrow's pool and glibc's malloc hold free back to the OS (no-op elsewhere)."""
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


# A stage's worker allocates millions of containers that outlive a young-generation collection
# (a session's parse, per-session caches) and almost no reference cycles, so the collector's
# default cadence (a young-generation pass once allocations of tracked objects exceed deallocations
# by 700) mostly re-traverses live objects.
WORKER_GC_THRESHOLD = 10_000


def collect_less_often() -> None:
    """In a stage's worker process: run the cyclic collector less often."""
    gc.set_threshold(WORKER_GC_THRESHOLD, *gc.get_threshold()[1:])


def tune_process() -> None:
    """What the ``evalkit`` command sets for itself before running a verb: Arrow on glibc's
    malloc, freed pages handed back after each stage, workers that collect cycles less often, and
    what is alive at start-up (imported modules) moved out of the cyclic collector's reach.

    The freeze: with hundreds of model requests in flight the collector otherwise rescans ~100,000
    long-lived objects on every full pass, stalling the event loop that carries the requests. Only
    cyclic garbage among the frozen objects is never freed; refcounting frees the rest."""
    from evalkit.common.workers import on_worker_start
    from evalkit.pipeline import set_between_stages

    use_system_allocator()
    set_between_stages(release_freed)
    on_worker_start(collect_less_often)
    gc.freeze()
