"""Side by side with a reference commit: ``python -m benchmarks --ref COMMIT`` (``make bench REF=COMMIT``).

The reference is checked out with ``git archive`` into ``<tmp>/evalkit-bench-ref-<sha12>/`` (no
worktree is registered in the repository) and installed there by its own Makefile
(``.venv/.installed``; ``.installed-dev`` with ``--tests``). A folder already there is reused; it
is removed at the end unless ``--keep-ref`` is given. Then each tree runs its own default
experiment (``evalkit run``, report included) ``--reps`` times, alternating reference and this
checkout, and the medians are compared with #35's "Done when" thresholds:

- wall time of the run (report included) and its CPU time (user + system of the ``evalkit``
  process and every worker it reaped): at most 0.6x the reference's;
- ``decision.json``: at most a tenth of the reference's;
- with ``--tests``, ``make test`` wall time: at most 0.6x.

Wall times move 2-3x between days on a shared machine, which is why only ratios taken within one
sitting, alternating, are compared.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# #35 "Done when": (what, most the new/ref ratio may be)
THRESHOLDS = {"wall": 0.6, "cpu": 0.6, "decision.json": 0.1, "make test wall": 0.6}
UNITS = {"wall": "s", "cpu": "s", "decision.json": "MB", "make test wall": "s"}


@dataclass(frozen=True)
class Sample:
    """One measured run of one tree."""

    wall: float  # seconds
    cpu: float  # user + system seconds of the process and its reaped children
    decision: float  # decision.json, MB


@dataclass(frozen=True)
class Comparison:
    """One figure's medians on both trees and what #35 asks of their ratio."""

    figure: str
    ref: float
    new: float
    limit: float

    @property
    def ratio(self) -> float:
        return self.new / self.ref if self.ref else float("nan")

    @property
    def holds(self) -> bool:
        return self.ratio <= self.limit


def compare(
    ref: Sequence[Sample], new: Sequence[Sample], tests: tuple[float, float] | None = None
) -> list[Comparison]:
    """Medians of each figure over the samples, reference against new; ``tests`` is the
    (reference, new) ``make test`` wall time when it was measured."""
    out = [
        Comparison(name, statistics.median(getattr(s, attr) for s in ref),
                   statistics.median(getattr(s, attr) for s in new), THRESHOLDS[name])
        for name, attr in (("wall", "wall"), ("cpu", "cpu"), ("decision.json", "decision"))
    ]  # fmt: skip
    if tests is not None:
        out.append(Comparison("make test wall", tests[0], tests[1], THRESHOLDS["make test wall"]))
    return out


def format_table(rows: Sequence[Comparison], ref: str, reps: int, sessions: int | None) -> str:
    """The comparison as a Markdown table, one row per figure, with the verdict against #35."""
    size = f"{sessions} sessions" if sessions else "the default size"
    lines = [
        f"Side by side with {ref}: default experiment at {size}, medians of {reps} alternating run(s) each",
        "",
        "| figure | reference | this checkout | ratio | #35 limit | holds |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for c in rows:
        unit = UNITS[c.figure]
        lines.append(
            f"| {c.figure} | {c.ref:.3f} {unit} | {c.new:.3f} {unit} | {c.ratio:.3f}x | "
            f"<= {c.limit:g}x | {'yes' if c.holds else 'no'} |"
        )
    return "\n".join(lines)


def _git_sha(ref: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def reference_tree(sha: str, dev: bool) -> Path:
    """The reference's source and venv under the temp folder: made (or reused) and installed."""
    tree = Path(tempfile.gettempdir()) / f"evalkit-bench-ref-{sha[:12]}"
    if not (tree / "pyproject.toml").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(["git", "archive", sha], cwd=REPO, stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise RuntimeError(f"git archive {sha} failed")
    target = ".venv/.installed-dev" if dev else ".venv/.installed"
    print(f"[bench] reference {sha[:12]} in {tree}: make {target}", flush=True)
    subprocess.run(["make", "-s", target], cwd=tree, check=True)
    return tree


def measure_run(tree: Path, out: Path, sessions: int | None) -> Sample:
    """One ``evalkit run`` of ``tree``'s default experiment into ``out``, report included."""
    cmd = [str(tree / ".venv" / "bin" / "evalkit"), "run", "--run-dir", str(out)]
    if sessions:
        cmd += ["--sessions", str(sessions)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, cwd=tree, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu, (out / "decision.json").stat().st_size / 1e6)


def measure_tests(tree: Path) -> float:
    """``make test`` wall time in ``tree`` (its ruff, import contracts and tests)."""
    t = time.perf_counter()
    subprocess.run(["make", "-s", "test"], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def run_reference(
    ref: str, reps: int = 3, sessions: int | None = None, tests: bool = False, keep: bool = False
) -> int:
    """Measure the reference and this checkout side by side and print the comparison."""
    sha = _git_sha(ref)
    tree = reference_tree(sha, tests)
    subprocess.run(
        ["make", "-s", ".venv/.installed-dev" if tests else ".venv/.installed"], cwd=REPO, check=True
    )
    samples: dict[str, list[Sample]] = {"ref": [], "new": []}
    try:
        with tempfile.TemporaryDirectory(prefix="evalkit-bench-runs-") as d:
            for i in range(reps):
                for side, root in (("ref", tree), ("new", REPO)):
                    s = measure_run(root, Path(d) / f"{side}-{i}", sessions)
                    samples[side].append(s)
                    print(
                        f"[bench] {side} run {i + 1}/{reps}: {s.wall:.1f}s wall, {s.cpu:.1f}s CPU", flush=True
                    )
        test_walls = (measure_tests(tree), measure_tests(REPO)) if tests else None
    finally:
        if not keep:
            shutil.rmtree(tree, ignore_errors=True)
    print()
    print(
        format_table(
            compare(samples["ref"], samples["new"], test_walls), f"{ref} ({sha[:12]})", reps, sessions
        )
    )
    print(f"\nload average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0
