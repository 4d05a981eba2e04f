"""Probes: deterministic and judge-based scorers of compaction events.

A probe is a function ``(ProbeInput) -> list[ProbeValue]`` registered by name with the metrics it
emits, their direction, and the failure it catches. Suites in the top-level ``probes/`` folder
name which probes run. This is the score stage: :func:`score_run` (:mod:`.stage`) runs a suite over
every stored event and writes the metrics table.
"""

# The built-in probes are named in PROBES (evalkit.score.base) and imported on first lookup.
from evalkit.score.base import PROBES, ProbeInput, ProbeValue, SessionView, probe
from evalkit.score.stage import score_events, score_run
from evalkit.score.suite import Suite, SuiteError, load_suite

__all__ = [
    "PROBES",
    "ProbeInput",
    "ProbeValue",
    "SessionView",
    "Suite",
    "SuiteError",
    "load_suite",
    "probe",
    "score_events",
    "score_run",
]
