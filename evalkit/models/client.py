"""The model client every stage calls: cache, single-flight, replicates and batching in front of
a backend.

``client(request)`` is sync and thread-safe. Identical requests in flight at the same time are
sent once (threads of one process share a future; processes share the cache's claim table), so
arms whose summarizer input is the same share one call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from queue import SimpleQueue

from evalkit.common.progress import log
from evalkit.contracts.config import ModelConfig
from evalkit.models.backends import Backend, StoreFailed, cache_path, get_backend
from evalkit.models.budget import Budget, budget_for
from evalkit.models.cache import CallCache
from evalkit.models.request import ChatRequest, ChatResponse
from evalkit.models.usage import record

POLICIES = ("use", "refresh", "off")


def same_model(requested: str, served: str) -> bool:
    """True when ``served`` is the requested model: the same name, or a dated snapshot of it
    (``gpt-4o`` answered by ``gpt-4o-2024-08-06``), as providers report."""
    return served == requested or served.startswith(requested + "-") or served.endswith("/" + requested)


class CacheMiss(RuntimeError):
    """The ``replay`` backend was asked for a call the cache does not hold."""


@dataclass
class ClientStats:
    """What the client did: calls sent to the backend, cache hits, and joins of an in-flight call."""

    sent: int = 0
    cache_hits: int = 0
    shared: int = 0
    errors: int = 0


class ModelClient:
    """A backend behind the call cache. Use :func:`make_client` to get one."""

    def __init__(
        self,
        backend: Backend,
        cache: CallCache | None,
        policy: str = "use",
        replicates: int = 1,
        budget: Budget | None = None,
        run_dir: str | os.PathLike | None = None,
    ):
        if policy not in POLICIES:
            raise ValueError(f"[model] cache = {policy!r}: expected one of {', '.join(POLICIES)}")
        self.backend = backend
        self.cache = cache
        self.policy = policy
        self.replicates = max(1, int(replicates))
        self.stats = ClientStats()
        self.budget = budget  # [model] max_calls / max_cost_usd: checked before each call is sent
        # Calls are counted into the run folder's ledger (evalkit.models.usage); a computed
        # stand-in (not cacheable) costs nothing and is not counted.
        self.run_dir = run_dir if (backend.cacheable or backend.cache_only) else None
        self._lock = threading.Lock()
        self._inflight: dict[str, Future] = {}
        self._warned: set[tuple[str, str]] = set()

    @property
    def name(self) -> str:
        return self.backend.name

    def key(self, request: ChatRequest) -> str:
        """The cache key of ``request`` for this client's backend and endpoint."""
        return request.key(self.backend.key_backend or self.backend.name, self.backend.base_url)

    def __call__(self, request: ChatRequest) -> ChatResponse:
        key = self.key(request)
        fut, owner = self._join(key)
        if not owner:
            return self._shared(request, fut.result())
        try:
            resp = self._resolve(key, request)
        except BaseException as e:
            self._land(key, fut, exc=e)
            raise
        self._land(key, fut, resp)
        return resp

    def _join(self, key: str) -> tuple[Future, bool]:
        """The in-process single-flight: this key's future, and whether the caller owns (sends) it."""
        with self._lock:
            fut = self._inflight.get(key)
            owner = fut is None
            if owner:
                fut = self._inflight[key] = Future()
            else:
                self.stats.shared += 1
        return fut, owner

    def _land(self, key: str, fut: Future, resp: ChatResponse | None = None, exc=None) -> None:
        """The owner's outcome to every caller that joined ``key``."""
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(resp)
        with self._lock:
            self._inflight.pop(key, None)

    def _shared(self, request: ChatRequest, resp: ChatResponse) -> ChatResponse:
        resp = replace(resp, cached=True)
        self._count("shared", request, resp)
        return resp

    def _uses_cache(self) -> CallCache | None:
        return self.cache if self.backend.cacheable or self.backend.cache_only else None

    def _claims(self) -> bool:
        return self._uses_cache() is not None and self.policy != "off"

    def _resolve(self, key: str, request: ChatRequest) -> ChatResponse:
        ready = self._prepare(key, request)
        if isinstance(ready, ChatResponse):
            return ready
        try:
            try:
                resp = self.backend(request)
            except BaseException:
                self._count("failed", request)
                raise
            return self._finish(key, request, ready, resp)
        finally:
            self._release(key)

    def _prepare(self, key: str, request: ChatRequest) -> ChatResponse | float:
        """Before a call is sent: a cached answer (or another process's), or the call claimed and
        its budget reserved (the reserved amount is returned; the caller must :meth:`_release`)."""
        cache = self._uses_cache()
        if cache is not None and (self.policy == "use" or self.backend.cache_only):
            hit = cache.get(key)
            if hit is not None:
                return self._hit(hit, key, request)
        if self.backend.cache_only:
            self._count("miss", request)
            raise CacheMiss(
                f"replay backend: no cached answer for request {key[:12]} "
                f"(model {request.model!r}, purpose {request.purpose}, replicate {request.replicate}) "
                f"in {cache.path if cache else '(no cache file)'}; run once with the real backend first"
            )
        if self._claims():
            while not cache.claim(key):
                hit = cache.wait(key)
                if hit is not None:
                    return self._hit(hit, key, request)
            # Another process may have answered and released between our miss and our claim:
            # look again now that the claim is ours, or that call would be paid twice.
            hit = cache.get(key) if self.policy == "use" else None
            if hit is not None:
                cache.release(key)
                return self._hit(hit, key, request)
        try:
            if self._claims():
                # Room for the answers in flight before the first is sent: a full disk then
                # still stores what was already paid for (CallCache.reserve).
                cache.reserve(self.backend.concurrency)
            return self.budget.reserve(request) if self.budget else 0.0
        except BaseException:
            self._release(key)
            raise

    def _finish(self, key: str, request: ChatRequest, reserved: float, resp: ChatResponse) -> ChatResponse:
        """After the backend answered: cache a good answer, settle the budget, count the call.

        The answer is stored first: when the disk fills up, a paid answer that made it into the
        cache is not paid again on ``--resume``, whatever became of its budget or ledger line."""
        resp.key = key
        with self._lock:
            self.stats.sent += 1
            self.stats.errors += 0 if resp.ok else 1
        self._served(request, resp)
        failed: list[StoreFailed] = []
        for step in (
            lambda: self._claims() and self.cache.put(key, request, resp, self.backend.base_url),
            # an unknown cost keeps the reservation
            lambda: self.budget and self.budget.settle(reserved, resp.cost_usd),
            lambda: self._count("sent" if resp.ok else "failed", request, resp),
        ):
            try:
                step()
            except StoreFailed as e:
                failed.append(e)
        if failed:
            raise failed[0]
        return resp

    def _served(self, request: ChatRequest, resp: ChatResponse) -> None:
        """Warn (once per pair and process) when the endpoint says another model answered."""
        served = resp.served_model
        if not served or same_model(request.model, served):
            return
        with self._lock:
            warned = (request.model, served) in self._warned
            self._warned.add((request.model, served))
        if not warned:
            log(
                f"warning: {self.backend.base_url} answered [model] model = {request.model!r} with "
                f"model {served!r}; recorded in each answer and in model-usage.jsonl (served_model)"
            )

    def _release(self, key: str) -> None:
        if self._claims():
            self.cache.release(key)

    def forget(self, request: ChatRequest) -> None:
        """Drop ``request``'s cached answer: the caller could not use it (an unparseable
        verdict), so the next run asks again instead of replaying it forever."""
        if self.cache is not None:
            self.cache.delete(self.key(request))

    def _hit(self, hit: ChatResponse, key: str, request: ChatRequest) -> ChatResponse:
        with self._lock:
            self.stats.cache_hits += 1
        self._count("cache_hit", request, hit)
        return replace(hit, key=key)

    def _count(self, outcome: str, request: ChatRequest, resp: ChatResponse | None = None) -> None:
        if self.run_dir is None:
            return
        paid = outcome in ("sent", "failed")
        extra = {}
        if paid and resp is not None:
            if resp.usage_error:
                extra["usage_invalid"] = resp.usage_error
            if resp.served_model and not same_model(request.model, resp.served_model):
                extra["served_model"] = resp.served_model
        record(
            self.run_dir,
            outcome=outcome,
            backend=self.backend.name,
            model=request.model,
            purpose=request.purpose,
            attempts=(resp.attempts if resp is not None else 1) if paid else 0,
            input_tokens=int(resp.usage.get("prompt_tokens", 0)) if paid and resp else 0,
            output_tokens=int(resp.usage.get("completion_tokens", 0)) if paid and resp else 0,
            cost_usd=resp.cost_usd if paid and resp else None,
            **extra,
        )

    def map(
        self, requests: Iterable[ChatRequest], concurrency: int | None = None, return_exceptions: bool = False
    ) -> list:
        """Answer many independent requests concurrently; results in input order. As with one
        call per request, every request is answered or fails before the first failure is raised.

        With ``return_exceptions``, a request that raised an ``Exception`` (a cache miss under the
        ``replay`` backend, say) has it in its place instead, so one bad request does not cost the
        others' answers; what stops the run (``StopRun``, ``EndpointUnusable``) is still raised."""
        reqs = list(requests)
        n = max(1, min(len(reqs), concurrency or self.backend.concurrency))
        if n > 1 and self.backend.submits:
            out = self._map_submitted(reqs, n)
        elif n > 1:
            stop = threading.Event()

            def one(r: ChatRequest):
                if stop.is_set():  # a stop (disk full, endpoint unusable): send nothing more
                    return None
                try:
                    return self(r)
                except BaseException as e:
                    if _stops(e):
                        stop.set()
                    raise

            with ThreadPoolExecutor(n, thread_name_prefix="evalkit-map") as pool:
                out = [f.exception() or f.result() for f in [pool.submit(one, r) for r in reqs]]
        else:
            out = []
            for r in reqs:
                try:
                    out.append(self(r))
                except Exception as e:
                    out.append(e)
        stop = next((r for r in out if _stops(r)), None)
        if stop is not None:
            raise stop
        for r in out:
            if isinstance(r, BaseException) and not (return_exceptions and isinstance(r, Exception)):
                raise r
        return out

    def _map_submitted(self, reqs: list[ChatRequest], n: int) -> list[ChatResponse]:
        """``map`` for a backend with its own event loop (:meth:`Backend.submit`): this thread runs
        the cache, single-flight, budget and accounting steps of every request, the loop holds up
        to ``n`` of them on the wire; each request's answer or exception, in input order. No
        thread per request in flight: at 256 in flight, 256 threads handing requests to one loop
        cost ~0.5 ms of CPU per request more (GIL handoffs). A claim held by another process is
        waited for here, holding up the next requests."""
        out: list = [None] * len(reqs)
        done: SimpleQueue = SimpleQueue()
        todo = iter(enumerate(reqs))
        busy = 0

        def start(i: int, request: ChatRequest) -> bool:
            """Start request ``i``; True if its answer will arrive on ``done``."""
            try:
                key = self.key(request)
            except Exception as e:  # not JSON: this request fails, the others go on
                out[i] = e
                return False
            fut, owner = self._join(key)
            if not owner:
                fut.add_done_callback(lambda f: done.put((i, key, None, f)))
                return True
            try:
                ready = self._prepare(key, request)
            except BaseException as e:
                self._land(key, fut, exc=e)
                out[i] = e
                return False
            if isinstance(ready, ChatResponse):
                self._land(key, fut, ready)
                out[i] = ready
                return False
            try:
                sent = self.backend.submit(request)
            except BaseException as e:
                self._release(key)
                self._land(key, fut, exc=e)
                out[i] = e
                return False
            sent.add_done_callback(lambda f: done.put((i, key, (fut, ready), f)))
            return True

        def land(i: int, key: str, owned, f: Future) -> None:
            request = reqs[i]
            if owned is None:  # joined another caller's call
                try:
                    out[i] = self._shared(request, f.result())
                except BaseException as e:
                    out[i] = e
                return
            fut, reserved = owned
            try:
                try:
                    resp = f.result()
                except BaseException:
                    self._count("failed", request)
                    raise
                out[i] = self._finish(key, request, reserved, resp)
                self._land(key, fut, out[i])
            except BaseException as e:
                out[i] = e
                self._land(key, fut, exc=e)
            finally:
                self._release(key)

        def landed(item) -> bool:
            """Land one answer; True if it stops the run (then nothing more is sent)."""
            land(*item)
            return _stops(out[item[0]])

        stopping = False
        try:
            while True:
                while busy < n and not stopping and (nxt := next(todo, None)) is not None:
                    busy += start(*nxt)
                    stopping = _stops(out[nxt[0]])
                if not busy:
                    break
                stopping = landed(done.get()) or stopping
                busy -= 1
        finally:
            # Interrupted (Ctrl-C): what is on the wire still ends (answered and cached, or
            # failed), as the thread pool's shutdown waits for its threads.
            while busy:
                land(*done.get())
                busy -= 1
        return out

    def sample(self, request: ChatRequest, k: int | None = None) -> list[ChatResponse]:
        """``k`` (default ``replicates``) samples of one request, replicate index 0..k-1 in the key."""
        return self.map([replace(request, replicate=i) for i in range(k or self.replicates)])

    def close(self) -> None:
        self.backend.close()
        if self.cache is not None:
            self.cache.release_ballast()


def _stops(x) -> bool:
    """An outcome that stops the run (a BaseException that is not an Exception: disk full, an
    unusable endpoint, a budget, Ctrl-C) rather than failing one request."""
    return isinstance(x, BaseException) and not isinstance(x, Exception)


_CLIENTS: dict[tuple, ModelClient] = {}
_CLIENTS_LOCK = threading.Lock()


def build_client(settings: ModelConfig, run_dir=None) -> ModelClient:
    """A new client for a ``[model]`` table (see :func:`client_for` for the shared one)."""
    path = cache_path(settings, run_dir)
    policy = settings.cache
    backend = get_backend(settings)
    wants_cache = backend.cacheable or backend.cache_only
    cache = CallCache(path) if path and wants_cache and (policy != "off" or backend.cache_only) else None
    budget = None if backend.cache_only or not backend.cacheable else budget_for(settings, run_dir)
    return ModelClient(backend, cache, policy, settings.replicates, budget, run_dir)


def client_for(settings: ModelConfig, run_dir=None) -> ModelClient:
    """The process's client for these settings: created once, then shared (keyed by pid so a
    forked worker never reuses its parent's event-loop thread or database connection)."""
    ident = (os.getpid(), settings.model_dump_json(), os.fspath(run_dir or ""))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(ident)
        if client is None:
            client = _CLIENTS[ident] = build_client(settings, run_dir)
        return client


def make_client(settings: ModelConfig, run_dir=None):
    """The callable every stage uses to call a model: ``client(request) -> response``.

    Sync and thread-safe; also ``client.map(requests)`` (concurrent) and
    ``client.sample(request)`` (``replicates`` samples). One client per process and settings:
    calling this again returns the same client, so single-flight spans every caller.
    """
    return client_for(settings, run_dir)
