"""``evalkit view RUN``: a static viewer of a run, written into the run folder (``view/``).

Opens from ``file://`` (no server, no network): an overview of verdicts, effects and the
scorecard; per candidate the sessions where it differs most from the baseline; per compaction the
baseline's and the candidate's resulting context side by side with the facts each kept or lost.
"""

from __future__ import annotations

import os
from pathlib import Path

VIEW_DIR = "view"


def write_view(run_dir: str | os.PathLike, workers: int | None = None) -> Path:
    """Write the viewer into ``RUN/view/``; returns its ``index.html`` (see :mod:`evalkit.view.build`)."""
    from evalkit.view.build import write_view as build

    return build(run_dir, workers)
