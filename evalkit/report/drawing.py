"""Who draws a report's figures: this process, or worker processes while the report goes on.

A figure takes matplotlib 0.3-0.8 s, and a report draws one per decision metric plus a few more.
Sections hand each figure to :meth:`FigureDrawer.draw` and get its path back at once, so the Markdown
that links it is written while the figure is still being drawn; :meth:`FigureDrawer.background`
waits for every figure before it returns. No matplotlib here: loading a run's data must not pay
for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

from evalkit.common.workers import worker_pool


class FigureDrawer:
    """Draws figures in this process, or on ``workers`` processes inside :meth:`background`."""

    def __init__(self) -> None:
        self._pool = None
        self._pending: list[tuple[Path, Future]] = []

    def draw(self, plot: Callable[..., Path], path: Path, *args) -> Path:
        """``plot(path, *args)``, which writes the figure at ``path``; returns ``path``. Inside
        :meth:`background` the figure may not be written yet when this returns."""
        if self._pool is None:
            return plot(path, *args)
        self._pending.append((path, self._pool.submit(plot, path, *args)))
        return path

    @contextmanager
    def background(self, workers: int) -> Iterator[FigureDrawer]:
        """Within, figures are drawn on up to ``workers`` processes (in this process when there
        is one core); on leaving, every figure is written, or the first failure is raised."""
        if workers <= 1 or self._pool is not None:
            yield self
            return
        with worker_pool(workers) as pool:
            self._pool = pool
            try:
                yield self
                for path, done in self._pending:
                    written = done.result()
                    if written != path:
                        raise RuntimeError(f"a figure meant for {path} was written to {written}")
            finally:
                self._pool, self._pending = None, []
