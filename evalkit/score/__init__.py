"""Probes: deterministic and judge-based scorers of compaction events.

A probe is a function ``(ProbeInput) -> list[ProbeValue]`` registered by name with the metrics it
emits, their direction, and the failure it catches. Suites in the top-level ``probes/`` folder
name which probes run.
"""

# Importing a probe module registers its probes (the registry lists them by name).
from evalkit.score import banks as _banks  # noqa: F401
from evalkit.score import cadence as _cadence  # noqa: F401
from evalkit.score import form as _form  # noqa: F401
from evalkit.score import identifiers as _identifiers  # noqa: F401
from evalkit.score import intent as _intent  # noqa: F401
from evalkit.score import invariants as _invariants  # noqa: F401
from evalkit.score import judge as _judge  # noqa: F401
from evalkit.score import size as _size  # noqa: F401
from evalkit.score import teststate as _teststate  # noqa: F401
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
