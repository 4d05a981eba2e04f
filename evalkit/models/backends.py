"""Model backends, registered by name. Each turns a :class:`ChatRequest` into a :class:`ChatResponse`."""

from __future__ import annotations

from collections.abc import Callable

from evalkit.models.request import ChatRequest, ChatResponse
from evalkit.registry import Registry

Backend = Callable[[ChatRequest], ChatResponse]
BACKENDS: Registry[Callable[[dict], Backend]] = Registry("backend")


def get_backend(settings: dict) -> Backend:
    """Build the backend named by ``settings["backend"]`` from the experiment's ``[model]`` table."""
    return BACKENDS.get(settings.get("backend", "extractive"))(settings)


def is_offline_standin(name: str) -> bool:
    """True for backends that are not a real model; every output they produce must say so."""
    entry = BACKENDS.entry(name)
    return bool(entry.info.get("offline_standin"))


# Importing registers the built-in backends.
from evalkit.models import extractive as _extractive  # noqa: E402, F401
