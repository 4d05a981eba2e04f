"""Continuation runs: does the agent behave well after a compaction?

From each compaction event's new context an agent acts for up to N tool calls in an environment
built from the recording (:mod:`~evalkit.continuation.environment`); its calls are scored for
re-failing known failures, redoing finished work, stopping, and matching the recorded next step
(:mod:`~evalkit.continuation.metrics`). The same scoring over the calls a real agent made after a
real recorded compaction is the observational baseline (:mod:`~evalkit.continuation.observational`).
"""

from evalkit.common.toolcalls import Op, classify
from evalkit.continuation.agents import AGENTS, ContinuationInput, Step, Transcript, is_proxy, make_agent
from evalkit.continuation.environment import UNAVAILABLE, Answer, ReplayEnvironment
from evalkit.continuation.metrics import continuation_metrics, metric_names, refail_redo
from evalkit.continuation.observational import compaction_points, observed_metrics
from evalkit.continuation.recording import SessionRecord
from evalkit.continuation.stage import run_continuation

__all__ = [
    "AGENTS",
    "UNAVAILABLE",
    "Answer",
    "ContinuationInput",
    "Op",
    "ReplayEnvironment",
    "SessionRecord",
    "Step",
    "Transcript",
    "classify",
    "compaction_points",
    "continuation_metrics",
    "is_proxy",
    "make_agent",
    "metric_names",
    "observed_metrics",
    "refail_redo",
    "run_continuation",
]
