"""Replay: walk sessions through a context window under each arm's compactor, emitting events."""

from evalkit.replay.candidates import ARMS
from evalkit.replay.compactor import Policy
from evalkit.replay.engine import SessionCache, replay_corpus, replay_session, replay_session_arms
from evalkit.replay.job import Job, Outcome, Pass
from evalkit.replay.requests import resolve_request
from evalkit.replay.settings import ReplaySettings
from evalkit.replay.variants import check_arm, policy_for

__all__ = [
    "ARMS",
    "Job",
    "Outcome",
    "Pass",
    "Policy",
    "ReplaySettings",
    "SessionCache",
    "check_arm",
    "policy_for",
    "replay_corpus",
    "replay_session",
    "replay_session_arms",
    "resolve_request",
]
