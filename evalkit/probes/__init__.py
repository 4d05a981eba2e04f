"""Probes: deterministic and judge-based scorers of compaction events.

A probe is a function ``(ProbeInput) -> list[ProbeValue]`` registered by name with the metrics it
emits, their direction, and the failure it catches. Suites in the top-level ``probes/`` folder
name which probes run.
"""

from evalkit.probes import banks as _banks  # noqa: F401
from evalkit.probes import cadence as _cadence  # noqa: F401
from evalkit.probes import deterministic as _deterministic  # noqa: F401  (registers the probes)
from evalkit.probes import identifiers as _identifiers  # noqa: F401
from evalkit.probes import judge as _judge  # noqa: F401
from evalkit.probes.base import PROBES, ProbeInput, ProbeValue, SessionView, probe
from evalkit.probes.score import score_events, score_run
from evalkit.probes.suite import Suite, SuiteError, load_suite

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
