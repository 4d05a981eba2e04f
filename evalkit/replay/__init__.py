"""Replay: walk sessions through a context window under each arm's compactor, emitting events."""

from evalkit.replay.compactor import ARMS, CompactionInput, CompactionResult
from evalkit.replay.engine import replay_corpus, replay_session
from evalkit.replay.settings import ReplaySettings

__all__ = ["ARMS", "CompactionInput", "CompactionResult", "ReplaySettings", "replay_corpus", "replay_session"]
