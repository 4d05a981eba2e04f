"""Progress: a tqdm bar on a terminal, one line per stage in CI logs."""

from __future__ import annotations

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


def log(line: str) -> None:
    """One line to stderr (progress and stage summaries never go to stdout, which carries results)."""
    print(f"[evalkit] {line}", file=sys.stderr, flush=True)
