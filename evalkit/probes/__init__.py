"""Probes: deterministic (and, later, judge-based) scorers of compaction events.

A probe is a function ``(ProbeInput) -> list[ProbeValue]`` registered by name with the metrics it
emits, their direction, and the failure it catches. Suites in the top-level ``probes/`` folder
name which probes run.
"""

from evalkit.probes import deterministic as _deterministic  # noqa: F401  (registers the probes)
from evalkit.probes.base import PROBES, ProbeInput, ProbeValue, probe
from evalkit.probes.score import score_run

__all__ = ["PROBES", "ProbeInput", "ProbeValue", "probe", "score_run"]
