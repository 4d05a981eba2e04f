"""Model backends, registered by name. Each turns a :class:`ChatRequest` into a :class:`ChatResponse`.

A backend is only the transport. Caching, single-flight, replicates and batching live in
:class:`evalkit.models.client.ModelClient`, which :func:`~evalkit.models.client.make_client` puts in front
of every backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future

from evalkit.common.registry import Registry
from evalkit.contracts.config import ModelConfig
from evalkit.models.request import ChatRequest, ChatResponse


class EndpointUnusable(BaseException):
    """The endpoint failed the same way too many times in a row (connection refused, 401, 403,
    404 model): the run stops with exit 2 and keeps what is done.

    A BaseException on purpose, like KeyboardInterrupt: the per-row handlers that turn a scorer's
    or an agent's bug into an error row (``except Exception``) must not swallow it."""


class StoreFailed(BaseException):
    """A paid answer (or its ledger line) could not be written: the disk is full, say. The run
    stops with exit 2, naming the file, before more calls are paid for and lost; what was
    stored stays, so ``--resume`` pays only for the rest. A BaseException for the same reason
    as :class:`EndpointUnusable`."""


class Backend:
    """What a backend declares about itself; ``__call__`` is sync and thread-safe."""

    name: str = ""
    #: The backend name and endpoint that the cache key binds (``replay`` borrows another's).
    key_backend: str = ""
    base_url: str = ""
    #: How many calls may usefully run at once (``map`` keeps this many in flight: on the event
    #: loop of a backend that ``submits``, else in as many threads).
    concurrency: int = 1
    #: False for backends cheaper than a cache lookup (the offline stand-in).
    cacheable: bool = True
    #: True for ``replay``: answers only from the cache.
    cache_only: bool = False
    #: True if :meth:`submit` sends without blocking (the client's ``map`` then needs no thread
    #: per request in flight).
    submits: bool = False

    def __call__(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    def submit(self, request: ChatRequest) -> Future:
        """Send ``request`` without waiting; the future resolves to what ``__call__`` returns (or
        raises). Only for backends with ``submits = True``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections and threads (a no-op for most backends)."""


class FunctionBackend(Backend):
    """A plain ``request -> response`` callable (a plugin's or a test's) seen as a cacheable backend."""

    def __init__(self, name: str, fn: Callable[[ChatRequest], ChatResponse]):
        self.name = self.key_backend = name
        self._fn = fn

    def __call__(self, request: ChatRequest) -> ChatResponse:
        return self._fn(request)


BACKENDS: Registry[Callable[[ModelConfig], Backend]] = Registry(
    "backend",
    {
        "extractive": "evalkit.models.extractive:extractive_backend",
        "openai": "evalkit.models.openai_backend:OpenAIBackend",
        "replay": "evalkit.models.openai_backend:ReplayBackend",
    },
)


def get_backend(settings: ModelConfig) -> Backend:
    """Build the backend named by ``settings.backend`` from the experiment's ``[model]`` table."""
    name = settings.backend
    backend = BACKENDS.get(name)(settings)
    return backend if isinstance(backend, Backend) else FunctionBackend(name, backend)


def cache_path(settings: ModelConfig, run_dir=None) -> str | None:
    """Where the call cache lives: ``[model] cache_path`` if set (a shared cache across runs),
    else ``<run_dir>/model-calls.sqlite``; None (memory only) when neither is known."""
    explicit = settings.cache_path
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    if run_dir is not None:
        return os.path.join(os.fspath(run_dir), "model-calls.sqlite")
    return None


def is_offline_standin(name: str) -> bool:
    """True for backends that are not a real model; every output they produce must say so."""
    entry = BACKENDS.entry(name)
    return bool(entry.info.get("offline_standin"))
