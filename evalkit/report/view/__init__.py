"""``evalkit view RUN``: a static viewer of a run, written into the run folder (``view/``).

Opens from ``file://`` (no server, no network): an overview of verdicts, effects and the
scorecard; per candidate the sessions where it differs most from the baseline; per compaction the
baseline's and the candidate's resulting context side by side with the facts each kept or lost.
:func:`evalkit.report.view.build.write_view` writes it. This module imports nothing, so the
report's sections can name the viewer's folder without importing the viewer.
"""

VIEW_DIR = "view"
