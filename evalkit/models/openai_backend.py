"""Any OpenAI-compatible endpoint through the ``openai`` SDK, plus the cache-only ``replay`` backend.

``AsyncOpenAI`` (with the SDK's aiohttp transport) runs on one background event-loop thread per
process; the sync, thread-safe ``__call__`` hands each request to that loop and ``submit`` does so
without waiting (``client.map``), so every caller shares one connection pool, bounded by a
semaphore of ``concurrency``. The SDK's own retries are off: this
module retries 429, 5xx, timeouts, dropped connections, malformed bodies, empty answers and
refusals with exponential backoff and jitter, honouring ``Retry-After``. What still fails after the
last attempt is returned as ``ChatResponse(text=None, error=...)``, never as an empty summary.

The API key is read from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``), never from the config: the resolved config is written into the run folder.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import json
import os
import random
import time
from typing import Any

from evalkit.common.redact import redact_text
from evalkit.contracts.config import ModelConfig
from evalkit.models.backends import BACKENDS, Backend, EndpointUnusable
from evalkit.models.completion import Malformed, Retryable, parse_completion
from evalkit.models.eventloop import EventLoop
from evalkit.models.request import ChatRequest, ChatResponse

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_RETRY_AFTER_S = 120.0
# One chat completion's body, after decompression. A summary under max_tokens = 4096 is well
# under 1 MB of JSON; an endpoint sending 100 MB answers (or a 300 KB gzip bomb) otherwise
# filled memory and the call cache, and the answer went back out in the next request.
MAX_BODY_BYTES = 16 << 20
# An error status's body (4xx/5xx): the SDK read it whole before raising, so a 500 with 100 MB of
# body cost 100 MB and more of memory per attempt. Only its first few hundred characters reach
# the error message, so far less is read than for an answer.
MAX_ERROR_BODY_BYTES = 64 << 10


def base_url_of(settings: ModelConfig) -> str:
    """The endpoint: ``[model] base_url``, else ``OPENAI_BASE_URL``, else OpenAI's."""
    url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return str(url).rstrip("/")


def api_key_of(settings: ModelConfig) -> str:
    """The key from the environment variable ``[model] api_key_env`` names (never from the config:
    :func:`evalkit.contracts.config.validate_config` refuses an ``api_key`` key)."""
    # A local endpoint (the fake server, vLLM, Ollama) accepts any key; the SDK insists on one.
    return os.environ.get(settings.api_key_env) or "sk-no-key"


def retry_after_s(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), if present."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return float(ra)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(ra) if ra else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class Oversized(Exception):
    """A body over :data:`MAX_BODY_BYTES`: not read further, not an answer."""


def not_json(base_url: str, ctype: str, raw: bytes, e: Exception) -> Retryable:
    """Why an HTTP 200 body is not a completion. A body that is not JSON at all (a proxy's login
    page, a captive portal's HTML) says the endpoint is not the API: it counts toward fail-fast
    and the message names its content type; a cut-off JSON body is an ordinary retry."""
    kind = ctype.split(";")[0].strip().lower() or "no Content-Type"
    head = raw.lstrip()[:1]
    if "json" in kind and head in (b"{", b"["):
        return Retryable(f"malformed response from {base_url}: {type(e).__name__}: {e}"[:300])
    start = raw.lstrip()[:60].decode("utf-8", "replace")
    return Retryable(
        f"HTTP 200 from {base_url} is {kind}, not JSON (it starts {start!r}); "
        "is a proxy or login page in front of [model] base_url?",
        fatal=f"HTTP 200 with {kind}, not JSON",
    )


class CrossOriginRedirect(Exception):
    """The endpoint redirected a request to another origin (scheme, host, port)."""


def same_origin_hook(endpoint_origin):
    """An httpx request hook refusing any request (a redirect's) that leaves ``endpoint_origin``:
    a 307/308 is followed with the request body, and the body is the prompt. httpx strips only
    the Authorization header when it crosses origins."""

    async def check(request) -> None:
        if request.url.origin != endpoint_origin:
            url = request.url.copy_with(query=None, fragment=None)
            raise CrossOriginRedirect(
                f"redirected to another origin ({url}); not following it with the prompt "
                "(set [model] base_url to that endpoint if it is the one you meant)"
            )

    return check


async def bounded_error_body(response) -> None:
    """An httpx response hook reading an error status's body within :data:`MAX_ERROR_BODY_BYTES`
    (decompressed) and closing the connection, before the SDK reads the body whole to build its
    ``APIStatusError``; the bounded part is the body the SDK then sees."""
    if response.status_code < 400:
        return
    chunks, n = [], 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            n += len(chunk)
            if n >= MAX_ERROR_BODY_BYTES:
                break
    except Exception:  # a broken error body: what arrived is still the message
        pass
    finally:
        await response.aclose()
    # httpx keeps a read body in ``_content`` (what ``aread``/``text`` return once closed); there
    # is no public way to hand a closed response a body.
    response._content = b"".join(chunks)[:MAX_ERROR_BODY_BYTES]


def http_client(endpoint: str):
    """The SDK's aiohttp transport (``openai[aiohttp]``), or the SDK's default (httpx) when
    aiohttp is not installed or the endpoint carries credentials (``user:pass@host``: aiohttp
    refuses them next to the SDK's Authorization header; httpx sends them as before). Either
    refuses redirects to another origin (:func:`same_origin_hook`).

    Measured against the fake server at 1 s latency and 256 requests in flight: the httpx
    connection pool rescans every connection (probing each idle socket) twice per request and
    keeps only 100 idle, so a pool of 256 costs ~3.3 ms of CPU per request on this 2-core
    machine; the aiohttp transport ~1.5 ms (docs/models.md, "Benchmark")."""
    import openai

    hooks = {"request": [same_origin_hook(_origin(endpoint))], "response": [bounded_error_body]}
    # By hand, not urlsplit: a redacted URL read back from config.json ("[REDACTED:...]@host")
    # is not one urlsplit accepts, and httpx has always sent it.
    if "@" not in endpoint.split("://", 1)[-1].split("/", 1)[0]:
        try:
            return openai.DefaultAioHttpClient(event_hooks=hooks)
        except (AttributeError, RuntimeError):  # an SDK without it, or installed without the extra
            pass
    return openai.DefaultAsyncHttpxClient(event_hooks=hooks)


def _origin(endpoint: str):
    """The endpoint's origin as httpx sees it (credentials in the URL are not part of it)."""
    import httpx2

    scheme, _, rest = endpoint.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    return httpx2.URL(f"{scheme}://{host}/").origin


# The transport's own exception, by class name (httpx's or aiohttp's, whichever the SDK used).
_REFUSED = ("ConnectError", "ClientConnectorError")  # never reached the server
_DROPPED = ("ServerDisconnectedError", "ClientOSError", "RemoteProtocolError", "ReadError")


def transport_chain(e: BaseException) -> list[BaseException]:
    """The exceptions under an SDK connection error, outermost first. The SDK wraps the HTTP
    library's exception, and its aiohttp adapter wraps aiohttp's (a refused connection reaches the
    SDK as httpx's ConnectTimeout), so only the whole chain tells refused from dropped from slow."""
    chain: list[BaseException] = []
    cause = e.__cause__
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__
    return chain


def _named(chain: list[BaseException], names: tuple[str, ...]) -> bool:
    return any(c.__name__ in names for e in chain for c in type(e).__mro__)


# Statuses that mean the endpoint (or the model name, or the key) is wrong, not busy.
FATAL_STATUS = {401: "unauthorized", 403: "forbidden", 404: "not found (model or path)"}


class OpenAIBackend(Backend):
    """Chat completions from an OpenAI-compatible endpoint."""

    name = key_backend = "openai"

    def __init__(self, settings: ModelConfig):
        # Credentials in the URL (user:pass@host) go to the SDK only; everything written (errors,
        # cache rows, keys) sees the redacted URL.
        self._endpoint = base_url_of(settings)
        self.base_url = redact_text(self._endpoint)
        self.concurrency = settings.concurrency
        self.timeout = settings.timeout
        self.max_retries = settings.max_retries
        self.backoff_base = settings.backoff_base
        self.backoff_max = settings.backoff_max
        self.prices = dict(settings.prices)
        self._api_key = api_key_of(settings)
        self._loop = EventLoop.get()
        self._client = None
        self._sem: asyncio.Semaphore | None = None
        self._rng = random.Random()
        # Fail fast: after this many consecutive attempts failing the same fatal way, stop the run.
        self.fail_fast_after = settings.fail_fast_after
        self._streak: tuple[str, int] = ("", 0)
        self._tripped: str | None = None

    async def _setup(self):
        # Built inside the loop thread so the client's connection pool belongs to that loop.
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._endpoint,
                max_retries=0,
                timeout=self.timeout,
                http_client=http_client(self._endpoint),
            )
            self._loop.clients.add(self._client)
            self._sem = asyncio.Semaphore(self.concurrency)

    submits = True

    def __call__(self, request: ChatRequest) -> ChatResponse:
        return self.submit(request).result()

    def submit(self, request: ChatRequest) -> concurrent.futures.Future:
        return self._loop.submit(self._checked(request))

    async def _checked(self, request: ChatRequest) -> ChatResponse:
        resp = await self.acall(request)
        if self._tripped:
            raise EndpointUnusable(self._tripped)
        return resp

    def _note(self, fatal: str | None, message: str) -> None:
        """Count consecutive fatal failures of one kind (any other outcome resets the count).
        Runs on the loop thread only, so no lock."""
        kind, n = self._streak
        n = n + 1 if fatal and fatal == kind else (1 if fatal else 0)
        self._streak = (fatal or "", n)
        if fatal and self.fail_fast_after and n >= self.fail_fast_after and not self._tripped:
            self._tripped = (
                f"{self.base_url}: {n} consecutive attempts failed ({fatal}): {message}; "
                "stopping (calls answered so far stay in the cache; fix the endpoint and rerun with --resume)"
            )

    def body(self, request: ChatRequest) -> dict:
        """The chat-completions request body (also a batch line's ``body``)."""
        kw: dict[str, Any] = {"model": request.model, "messages": list(request.messages)}
        if request.tools:
            kw["tools"] = list(request.tools)
        kw["temperature"] = request.temperature
        if request.max_tokens:
            kw["max_tokens"] = request.max_tokens
        if request.seed is not None:
            kw["seed"] = request.seed
        kw.update(dict(request.extra))
        return kw

    def _headers(self, request: ChatRequest) -> dict[str, str]:
        # Lets a log (the fake server's, a proxy's) tie each HTTP request to its cache entry.
        return {
            "X-Evalkit-Request-Key": request.key(self.key_backend, self.base_url),
            "X-Evalkit-Replicate": str(request.replicate),
            "X-Evalkit-Purpose": request.purpose,
        }

    async def _post(self, request: ChatRequest, got: dict) -> tuple[bytes, str]:
        """POST the request; the body (decompressed, at most :data:`MAX_BODY_BYTES`) and its
        content type. ``got`` tracks how far the answer came, for the timeout's message."""
        import httpx2

        # The SDK's generic POST, streamed: ``chat.completions.create`` would first walk every
        # message through its TypedDict transform, an identity for chat parameters (no aliases,
        # no formats) that costs ~0.15 ms per message: 9 ms of CPU for an agent's 60-message
        # request, against ~1 ms for everything else. Auth as create's. Streamed, so the body
        # is read here, within a bound, instead of whole by the SDK.
        resp = await self._client.post(
            "/chat/completions",
            body=self.body(request),
            cast_to=httpx2.Response,
            stream=True,
            options={"headers": self._headers(request), "security": {"bearer_auth": True}},
        )
        got["headers"] = True
        try:
            ctype = resp.headers.get("content-type", "")
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise Oversized(f"a {int(declared):,}-byte body (Content-Length)")
            chunks: list[bytes] = []
            try:
                async for chunk in resp.aiter_bytes():  # decompressed in bounded pieces
                    got["bytes"] += len(chunk)
                    if got["bytes"] > MAX_BODY_BYTES:
                        raise Oversized(f"over {got['bytes']:,} bytes after decompression")
                    chunks.append(chunk)
            except httpx2.DecodingError as e:
                raise Retryable(f"malformed response from {self.base_url}: undecodable body ({e})") from None
            except httpx2.TimeoutException:
                raise TimeoutError from None
            except httpx2.TransportError as e:
                raise Retryable(f"connection error from {self.base_url} mid-answer: {e}") from None
        finally:
            await resp.aclose()
        return b"".join(chunks), ctype

    async def _once(self, request: ChatRequest) -> ChatResponse:
        import openai

        t0 = time.perf_counter()
        got = {"headers": False, "bytes": 0}
        raw, ctype = b"", ""
        try:
            # [model] timeout bounds the whole attempt: the SDK's timeout is per read, so an
            # endpoint trickling a byte a second held a call for minutes.
            async with asyncio.timeout(self.timeout):
                raw, ctype = await self._post(request, got)
            completion = json.loads(raw)
        except TimeoutError:
            so_far = (
                f"the answer was still arriving ({got['bytes']:,} bytes so far)"
                if got["headers"]
                else "no answer yet"
            )
            raise Retryable(
                f"timeout after {self.timeout:g}s from {self.base_url}: {so_far}; "
                "[model] timeout bounds each whole attempt"
            ) from None
        except Oversized as e:
            # Not retried (the same request would bring the same answer) and never cached.
            return ChatResponse(
                None,
                self.name,
                request.model,
                error=f"oversized answer from {self.base_url}: {e}; at most {MAX_BODY_BYTES:,} bytes are read",
                latency_s=time.perf_counter() - t0,
            )
        except CrossOriginRedirect as e:
            msg = f"{self.base_url}: {e}"
            self._note("redirected to another origin", msg)
            return ChatResponse(None, self.name, request.model, error=redact_text(msg))
        except openai.APIStatusError as e:
            msg = f"HTTP {e.status_code} from {self.base_url}: {e.message}"[:500]
            if e.status_code == 429 or e.status_code >= 500 or e.status_code == 408:
                raise Retryable(msg, retry_after_s(e.response.headers)) from None
            fatal = FATAL_STATUS.get(e.status_code)
            self._note(f"HTTP {e.status_code} {fatal}" if fatal else None, msg)
            return ChatResponse(None, self.name, request.model, error=redact_text(msg))
        except openai.APIConnectionError as e:  # APITimeoutError included
            chain = transport_chain(e)
            if isinstance(e, openai.APITimeoutError) and not _named(chain, _DROPPED):
                raise Retryable(f"timeout after {self.timeout:g}s from {self.base_url}") from None
            # Refused or unresolvable (never reached the server) is fatal when it persists; a
            # dropped connection mid-answer is not.
            fatal = "cannot connect" if _named(chain, _REFUSED) else None
            raise Retryable(
                f"connection error from {self.base_url}: {e.__cause__ or e}", fatal=fatal
            ) from None
        except (ValueError, openai.APIResponseValidationError) as e:
            raise not_json(self.base_url, ctype, raw, e) from None
        try:
            return parse_completion(
                completion, request, self.name, self.base_url, self.prices, time.perf_counter() - t0
            )
        except Malformed as e:
            raise Retryable(f"malformed response from {self.base_url}: {e}") from None

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
        cap = min(self.backoff_max, self.backoff_base * 2**attempt)
        return cap / 2 + self._rng.uniform(0, cap / 2)  # "equal jitter": spread, never near zero

    async def acall(self, request: ChatRequest) -> ChatResponse:
        """One request with retries; the semaphore is held only while a request is on the wire."""
        await self._setup()
        errors: list[str] = []
        t0 = time.perf_counter()
        for attempt in range(self.max_retries + 1):
            if self._tripped:
                return ChatResponse(None, self.name, request.model, error=self._tripped, attempts=attempt)
            async with self._sem:
                try:
                    resp = await self._once(request)
                    resp.attempts = attempt + 1
                    if resp.error is None:
                        self._note(None, "")
                    if resp.error:
                        resp.error = "; ".join([*errors, resp.error])
                    return resp
                except Retryable as e:
                    errors.append(redact_text(str(e)))
                    retry_after = e.retry_after
                    self._note(e.fatal, errors[-1])
            if attempt < self.max_retries and not self._tripped:
                await asyncio.sleep(self._delay(attempt, retry_after))
        return ChatResponse(
            None,
            self.name,
            request.model,
            error=f"failed after {self.max_retries + 1} attempts: {errors[-1]}",
            latency_s=time.perf_counter() - t0,
            attempts=self.max_retries + 1,
        )

    def close(self) -> None:
        if self._client is not None:
            self._loop.run(self._client.close())
            self._client = None


class ReplayBackend(Backend):
    """Answers only from the cache, under the key the replayed backend used."""

    name = "replay"
    cache_only = True

    def __init__(self, settings: ModelConfig):
        self.key_backend = settings.replay_backend or "openai"
        self.base_url = redact_text(base_url_of(settings)) if self.key_backend == "openai" else ""

    def __call__(self, request: ChatRequest) -> ChatResponse:  # the client never gets here
        raise RuntimeError("the replay backend answers from the cache only")


BACKENDS.add(
    "openai",
    OpenAIBackend,
    "any OpenAI-compatible endpoint via the openai SDK (base_url, model; key from the environment)",
)
BACKENDS.add(
    "replay",
    ReplayBackend,
    "answers only from the call cache, failing clearly on a miss (exact reruns, CI)",
)
