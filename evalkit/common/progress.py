"""Progress: a tqdm bar on a terminal, one line per stage in CI logs.

Stage lines go through the ``evalkit`` logger (``logging.getLogger("evalkit")``, level INFO): the
``evalkit`` command installs :class:`StderrHandler` (one ``[evalkit] …`` line each on stderr); a
notebook or a Ray worker that imports evalkit can silence or route them like any other logger.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def interactive() -> bool:
    """Bars only where a person watches: a TTY, and not in CI."""
    return sys.stderr.isatty() and not os.environ.get("CI")


def track(items: Iterable[T], stage: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """Iterate with a bar on a terminal; elsewhere print one summary line when the stage ends."""
    start = time.perf_counter()
    n = 0
    if interactive():
        for item in tqdm(items, desc=stage, total=total, unit=unit, file=sys.stderr, leave=False):
            n += 1
            yield item
    else:
        for item in items:
            n += 1
            yield item
    log(f"{stage}: {n} {unit} in {time.perf_counter() - start:.1f}s")


LOGGER = logging.getLogger("evalkit")


def log(line: str) -> None:
    """One progress or stage-summary line on the ``evalkit`` logger (never stdout, which carries
    results)."""
    LOGGER.info(line)


class StderrHandler(logging.Handler):
    """``[evalkit] message`` on whatever ``sys.stderr`` is when the line is written (so a test's
    captured stderr, or a redirected one, gets it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"[evalkit] {record.getMessage()}", file=sys.stderr, flush=True)
        except Exception:
            self.handleError(record)


def log_to_stderr() -> None:
    """Install :class:`StderrHandler` on the ``evalkit`` logger at INFO, once (the CLI calls it)."""
    if not any(isinstance(h, StderrHandler) for h in LOGGER.handlers):
        LOGGER.addHandler(StderrHandler())
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
