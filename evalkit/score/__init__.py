"""Probes: deterministic and judge-based scorers of compaction events.

A probe is a function ``(ProbeInput) -> list[ProbeValue]`` registered by name with the metrics it
emits, their direction, and the failure it catches. Suites in the top-level ``probes/`` folder
name which probes run.
"""

# Importing a probe module registers its probes (the registry lists them by name).
from evalkit.probes import banks as _banks  # noqa: F401
from evalkit.probes import cadence as _cadence  # noqa: F401
from evalkit.probes import form as _form  # noqa: F401
from evalkit.probes import identifiers as _identifiers  # noqa: F401
from evalkit.probes import intent as _intent  # noqa: F401
from evalkit.probes import invariants as _invariants  # noqa: F401
from evalkit.probes import judge as _judge  # noqa: F401
from evalkit.probes import size as _size  # noqa: F401
from evalkit.probes import teststate as _teststate  # noqa: F401
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
