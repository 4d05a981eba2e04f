"""``evalkit view RUN``: a static viewer of a run, written into the run folder (``view/``)."""

VIEW_DIR = "view"
