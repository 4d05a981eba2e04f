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


def make_client(settings: dict, run_dir=None) -> Backend:
    """The callable every stage uses to call a model: ``client(request) -> response``.

    Walking skeleton: the backend itself. The model-layer issue puts the persistent call cache,
    single-flight and replicates behind this same signature (thread-safe, sync).
    """
    return get_backend(settings)


def is_offline_standin(name: str) -> bool:
    """True for backends that are not a real model; every output they produce must say so."""
    entry = BACKENDS.entry(name)
    return bool(entry.info.get("offline_standin"))


# Importing registers the built-in backends.
from evalkit.models import extractive as _extractive  # noqa: E402, F401
