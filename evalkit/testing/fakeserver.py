"""A local fake OpenAI-compatible server for tests and benchmarks: real HTTP on 127.0.0.1.

It speaks ``POST /v1/chat/completions`` (plain and with tools) and ``GET /v1/models``, answers
from a script (JSON list or JSONL of rules: the first rule whose ``match`` substring or ``regex``
occurs in the request's message text wins) or else an echo rule, records every request to a JSONL
log as it arrives (before answering it, so the log is complete once the client has its answer;
a client that gave up before its answer was written gets a line amending that request's status
to -1, folded in by ``evalkit.testing.serverlog.read_log``), and injects faults on demand:

=============  ==================================================================
``latency``    answers after an extra ``fault_latency_s``
``429``        HTTP 429 with ``Retry-After``
``500``        HTTP 500
``drop``       closes the connection without answering
``timeout``    holds the connection for ``hang_s`` and then closes it
``malformed``  HTTP 200 whose body is not valid JSON
``empty``      HTTP 200 with empty content
``refusal``    HTTP 200 whose message is a refusal (``refusal`` set, content null)
``length``     HTTP 200 whose answer is cut off: half the text, ``finish_reason = "length"``
=============  ==================================================================

Faults are drawn per request with the configured rates. The draw is a hash of (seed, the request
body, how many times the request's key was seen), so a given sequence of attempts meets the same
faults on every run regardless of thread or process scheduling. The body, not the client's key, is
hashed because the key names the endpoint, and a test server's port changes from run to run. A
request may force a fault with the header ``X-Fake-Fault: <name>`` (``none`` forces success). The
API key is never logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from evalkit.models.prefix import PrefixIndex
from evalkit.testing.fakebatch import BatchDesk, BatchFaults, batch_route
from evalkit.testing.faults import REFUSAL_TEXT, FaultPlan, Rule

# The HTTP status each fault answers with (0: no answer); every other request gets 200.
_STATUS = {"429": 429, "500": 500, "drop": 0, "timeout": 0}


def _text_of(messages: list[dict]) -> str:
    parts = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list):
            parts.extend(str(x.get("text", "")) for x in c if isinstance(x, dict))
        elif c:
            parts.append(str(c))
    return "\n".join(parts)


class _HTTPServer(ThreadingHTTPServer):
    # The listen backlog is set when the socket binds; the default (5) drops the SYNs of 64
    # clients connecting at once, and each dropped SYN costs a 1 s retransmit.
    request_queue_size = 512
    daemon_threads = True
    block_on_close = False


class FakeServer:
    """The server; ``with FakeServer(...) as s: s.url`` is its ``/v1`` base URL."""

    def __init__(
        self,
        plan: FaultPlan | None = None,
        script: list[Rule] | None = None,
        log_path: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        models: tuple[str, ...] = ("fake-model",),
        log_bodies: bool = True,
        echo_chars: int = 400,
        batch: BatchFaults | None = None,
    ):
        self.plan = plan or FaultPlan()
        self.script = script or []
        self.log_path = Path(log_path) if log_path else None
        self.models = models
        self.log_bodies = log_bodies
        self.echo_chars = echo_chars
        self._seen: dict[str, int] = {}
        self._prefixes = PrefixIndex()  # a provider's prompt-prefix cache: cached_tokens in usage
        self._lock = threading.Lock()
        self._log_fh = open(self.log_path, "a", encoding="utf-8") if self.log_path else None  # noqa: SIM115
        self.httpd = _HTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self._thread: threading.Thread | None = None
        self.batches = BatchDesk(self, batch or BatchFaults(seed=self.plan.seed))  # files + batches endpoints

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.05,), name="fake-server", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._log_fh:
            self._log_fh.close()
            self._log_fh = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- per request ---------------------------------------------------------------------------
    def attempt_of(self, key: str) -> int:
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
            return n

    def record(self, entry: dict) -> None:
        if self._log_fh is None:
            return
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        with self._lock:
            self._log_fh.write(line + "\n")
            self._log_fh.flush()

    def answer(self, body: dict, replicate: str | None = None) -> dict:
        """The completion for a request body (script rule or echo). A ``replicate`` other than 0
        (the ``X-Evalkit-Replicate`` header) gets an echo of its own, as a sampling endpoint
        answers each sample of one prompt differently: an A/A arm's summaries then differ from
        the baseline's, as they do on a real endpoint, and what follows them is asked again."""
        messages = body.get("messages") or []
        text = _text_of(messages)
        rule = next((r for r in self.script if r.matches(text)), None)
        tools = body.get("tools") or []
        tool_calls = []
        if rule is not None:
            reply, calls = rule.reply, rule.tool_calls
        else:
            last_user = next((_text_of([m]) for m in reversed(messages) if m.get("role") == "user"), "")
            sample = f"\0replicate {replicate}" if replicate not in (None, "", "0") else ""
            digest = hashlib.sha256((text + sample).encode()).hexdigest()[:12]
            reply = f"[fake-server echo {digest}] {last_user[: self.echo_chars]}"
            calls = (
                [{"name": tools[0]["function"]["name"], "arguments": {"echo": last_user[:80]}}]
                if tools
                else []
            )
        for i, c in enumerate(calls):
            args = c.get("arguments", {})
            tool_calls.append(
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        with self._lock:
            cached = self._prefixes.add(text)
        if tool_calls and rule is None:
            reply = None
        msg: dict[str, Any] = {"role": "assistant", "content": reply}
        if tool_calls:
            msg["tool_calls"] = tool_calls
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [
                {"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": math.ceil(len(text) / 4),
                "completion_tokens": math.ceil(len(reply or "") / 4),
                "total_tokens": math.ceil(len(text) / 4) + math.ceil(len(reply or "") / 4),
                "prompt_tokens_details": {"cached_tokens": cached // 4},
            },
        }


def _handler(server: FakeServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do
        # Headers and body go out in separate writes; with Nagle on, each answer would wait
        # for the client's delayed ACK (~40 ms).
        disable_nagle_algorithm = True

        def log_message(self, *args):  # quiet: the JSONL log is the record
            pass

        def _send(self, status: int, payload: bytes, headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, status: int, obj: dict, headers: dict | None = None) -> None:
            self._send(status, json.dumps(obj).encode(), headers)

        def _drop(self) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _bytes(self, data: bytes) -> None:
            self._send(200, data)

        def do_GET(self):
            routed = batch_route(server.batches, "GET", self.path, self.headers, b"")
            if routed is not None:
                return self._bytes(routed[1]) if isinstance(routed[1], bytes) else self._json(*routed)
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                server.record({"ts": time.time(), "method": "GET", "path": self.path, "status": 200})
                data = [
                    {"id": m, "object": "model", "created": 0, "owned_by": "evalkit"} for m in server.models
                ]
                return self._json(200, {"object": "list", "data": data})
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def parse_request(self):
            self.arrived = time.perf_counter()  # the request line has just been read (for the latency)
            self.arrived_at = time.time()  # the same instant on the wall clock (the log's ts)
            return super().parse_request()

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n)
            routed = batch_route(server.batches, "POST", self.path, self.headers, raw)
            if routed is not None:
                return self._json(*routed)
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                return self._json(
                    400, {"error": {"message": "request body is not JSON", "type": "invalid_request"}}
                )
            body_sha = hashlib.sha256(raw).hexdigest()
            key = self.headers.get("X-Evalkit-Request-Key") or body_sha
            attempt = server.attempt_of(key)
            forced = self.headers.get("X-Fake-Fault")
            fault = (None if forced == "none" else forced) if forced else server.plan.draw(body_sha, attempt)
            entry = {
                # when the request arrived, not when its body was parsed: on a loaded machine one
                # body parses slower than the next, so two calls made one after the other could be
                # logged closer together than the latency, as if they had overlapped
                "ts": self.arrived_at,
                "method": "POST",
                "path": self.path,
                "key": key,
                "body_sha": body_sha,
                "replicate": self.headers.get("X-Evalkit-Replicate"),
                "purpose": self.headers.get("X-Evalkit-Purpose"),
                "attempt": attempt,
                "fault": fault,
                "model": body.get("model"),
                "tools": len(body.get("tools") or []),
                "authorized": bool(self.headers.get("Authorization")),
            }
            if server.log_bodies:
                entry["body"] = body
            plan = server.plan
            # Logged on arrival, before any wait or answer: once a client has its answer (or has
            # sent a request), the line is in the log, and a reader need not wait for it to settle.
            entry["status"] = _STATUS.get(fault, 200)
            server.record(entry)
            if plan.latency_s:
                # Counted from the request's arrival, so the answer comes ``latency_s`` after it as
                # from a real endpoint, not ``latency_s`` plus this server's own parsing and
                # hashing (more in a burst of 256 requests contending for its GIL).
                time.sleep(max(0.0, plan.latency_s - (time.perf_counter() - self.arrived)))
            if fault == "latency":
                time.sleep(plan.fault_latency_s)
            try:
                self._respond(fault, body, plan)
            except (BrokenPipeError, ConnectionResetError):
                # the client gave up (its timeout) before the answer was written
                server.record({"amends": {"key": key, "attempt": attempt}, "status": -1})
                self.close_connection = True

        def _respond(self, fault: str | None, body: dict, plan: FaultPlan) -> None:
            """Write the answer (or the fault)."""
            if fault == "429":
                self._json(
                    429,
                    {"error": {"message": "rate limited (fake)", "type": "rate_limit"}},
                    {"Retry-After": plan.retry_after},
                )
            elif fault == "500":
                self._json(500, {"error": {"message": "internal error (fake)", "type": "server_error"}})
            elif fault == "drop":
                self._drop()
            elif fault == "timeout":
                time.sleep(plan.hang_s)
                self._drop()
            elif fault == "malformed":
                self._send(200, b'{"id": "chatcmpl-fake", "choices": [{"message": {"content": "tru')
            else:
                completion = server.answer(body, self.headers.get("X-Evalkit-Replicate"))
                msg = completion["choices"][0]["message"]
                if fault in ("empty", "refusal"):
                    msg.pop("tool_calls", None)
                    msg["content"] = "" if fault == "empty" else None
                    if fault == "refusal":
                        msg["refusal"] = REFUSAL_TEXT
                    completion["choices"][0]["finish_reason"] = "stop"
                elif fault == "length":
                    text = msg.get("content") or ""
                    msg["content"] = text[: max(1, len(text) // 2)]
                    completion["choices"][0]["finish_reason"] = "length"
                self._json(200, completion)

    return Handler
