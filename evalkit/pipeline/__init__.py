"""Orchestration: running the stages in order (``run``), completion markers for ``--resume``,
the run-folder lock, shards and their merge, executors (local, Ray) and the cost plan."""
