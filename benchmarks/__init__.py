"""Benchmarks: each registered function returns rows of (figure, value, unit).

``make bench`` (``python -m benchmarks [--only NAME] [--out FILE]`` from the repository root) runs
them all and prints one table; ``make bench REF=COMMIT`` (``--ref``) compares this checkout's
default run with a reference commit's instead (benchmarks.reference). Benchmarks are never timed
assertions in the test suite; numbers quoted in issue notes come from here.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

from evalkit.common.registry import Registry


@dataclass(frozen=True)
class Figure:
    figure: str
    value: float
    unit: str


Benchmark = Callable[[], list[Figure]]
BENCHMARKS: Registry[Benchmark] = Registry("benchmark")

# One module per stage; add yours here.
MODULES = [
    "machine",  # first: the speed every later timing was taken at
    "corpus",
    "importers",
    "score",
    "report",
    "models",
    "stats",
    "replay",
    "continuation",
    "scale",
    "stages",  # peak RSS per stage, each in its own process
]


def benchmark(name: str, description: str):
    return BENCHMARKS.register(name, description)


# Figures computed from other benchmarks' rows (each benchmark runs in its own process, so a
# comparison between two of them is made here, after both ran): rows in, extra rows out.
DERIVED: list[Callable[[list[Figure]], list[Figure]]] = []


def derived(fn: Callable[[list[Figure]], list[Figure]]) -> Callable[[list[Figure]], list[Figure]]:
    """Register ``fn``: it gets every row of the run and returns figures to add at the end."""
    DERIVED.append(fn)
    return fn


def _load() -> None:
    for m in MODULES:
        importlib.import_module(f"benchmarks.{m}")


def _run_one(name: str) -> list[Figure]:
    _load()
    return BENCHMARKS.get(name)()


def run_benchmarks(only: str | None = None, out: str | None = None) -> int:
    """Run every benchmark (or those matching ``only``) and print the table."""
    _load()
    rows: list[tuple[str, Figure]] = []
    for e in BENCHMARKS:
        if only and only not in e.name:
            continue
        t = time.perf_counter()
        # Each benchmark runs in a fresh process: peak-memory figures are high-water marks of a
        # process's lifetime, and one benchmark's leftovers must not show up in the next one's.
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as ex:
            figures = ex.submit(_run_one, e.name).result()
        print(f"[bench] {e.name}: {time.perf_counter() - t:.1f}s", flush=True)
        rows.extend((e.name, f) for f in figures)
    for fn in DERIVED:
        rows.extend(("derived", f) for f in fn([f for _, f in rows]))
    w = max((len(f.figure) for _, f in rows), default=6)
    print(f"\n{'figure':{w}}  {'value':>14}  unit")
    print(f"{'-' * w}  {'-' * 14}  ----")
    for _, f in rows:
        print(f"{f.figure:{w}}  {f.value:>14,.3f}  {f.unit}")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(
                [{"benchmark": b, "figure": f.figure, "value": f.value, "unit": f.unit} for b, f in rows],
                fh,
                indent=2,
            )
    return 0
