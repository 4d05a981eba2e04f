"""The model layer: every summarizer, judge and agent call goes through here."""

from evalkit.models.backends import BACKENDS, Backend, get_backend, is_offline_standin
from evalkit.models.client import make_client
from evalkit.models.request import ChatRequest, ChatResponse

__all__ = [
    "BACKENDS",
    "Backend",
    "ChatRequest",
    "ChatResponse",
    "get_backend",
    "is_offline_standin",
    "make_client",
]
