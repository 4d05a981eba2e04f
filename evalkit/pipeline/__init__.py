"""Orchestration: running the stages in order (``run``), completion markers for ``--resume``,
the run-folder lock, shards and their merge, executors (local, Ray) and the cost plan."""

from __future__ import annotations

from collections.abc import Callable


def _nothing() -> None:
    pass


# Called after each stage (evalkit.pipeline.run). The evalkit command hands freed memory back to
# the OS here (evalkit.cli.memory.release_freed): allocator behaviour is process-wide, so it is the
# application's choice; a library caller (a notebook, a test) keeps its process as it is.
between_stages: Callable[[], None] = _nothing


def set_between_stages(fn: Callable[[], None]) -> None:
    """Call ``fn`` after every stage of every run in this process."""
    global between_stages
    between_stages = fn
