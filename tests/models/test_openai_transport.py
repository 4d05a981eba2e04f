"""The openai backend's transport (issue 18, item 5): the SDK's generic POST with its aiohttp
transport must put on the wire exactly the request the cache keys, classify transport failures
(dropped, timed out) as before, keep working with credentials in the URL, and exit quietly."""

from __future__ import annotations

import subprocess
import sys

from evalkit.contracts.config import ModelConfig
from evalkit.models import ChatRequest
from evalkit.models.client import build_client
from evalkit.models.openai_backend import http_client
from evalkit.testing.faults import FaultPlan
from evalkit.testing.serverlog import read_log

TOOL = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}


def settings(url, **kw):
    return ModelConfig.model_validate(
        {"backend": "openai", "model": "fake-model", "base_url": url, "timeout": 2.0, "cache": "off", **kw}
    )


def test_the_body_on_the_wire_is_the_request_and_the_header_its_key(fake_server, tmp_path):
    srv = fake_server()
    # An agent-shaped request: many messages, tools, and sampling parameters in `extra`.
    messages = tuple(
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "x" * 50}
        for i in range(41)
    )
    req = ChatRequest(
        "fake-model",
        messages,
        tools=(TOOL,),
        max_tokens=64,
        seed=7,
        purpose="agent",
        replicate=2,
        extra=(("stop", ["END"]), ("top_p", 0.5)),
    )
    client = build_client(settings(srv.url), tmp_path)
    resp = client(req)
    assert resp.ok and resp.tool_calls and resp.tool_calls[0]["name"] == "read"
    (entry,) = read_log(srv.log_path)
    assert entry["body"] == {
        "model": "fake-model",
        "messages": [dict(m) for m in messages],
        "tools": [TOOL],
        "temperature": 0.0,
        "max_tokens": 64,
        "seed": 7,
        "stop": ["END"],
        "top_p": 0.5,
    }
    assert entry["key"] == client.key(req) and entry["replicate"] == "2" and entry["purpose"] == "agent"
    assert entry["authorized"]


def test_a_dropped_connection_and_a_timeout_are_told_apart(fake_server, tmp_path):
    req = ChatRequest("fake-model", ({"role": "user", "content": "hello"},))
    dropped = build_client(
        settings(fake_server(FaultPlan(rates={"drop": 1.0})).url, max_retries=0), tmp_path
    )(req)
    assert "connection error" in dropped.error and "timeout" not in dropped.error
    hung = fake_server(FaultPlan(rates={"timeout": 1.0}, hang_s=1.0))
    slow = build_client(settings(hung.url, max_retries=0, timeout=0.3), tmp_path)(req)
    assert "timeout after 0.3s" in slow.error


def test_credentials_in_the_url_use_the_sdk_default_transport_and_still_answer(fake_server, tmp_path):
    srv = fake_server()
    import openai

    # aiohttp (an extra of the openai dependency) where it can; httpx with credentials
    assert not isinstance(
        http_client(srv.url.replace("http://", "http://user:pw@")), openai.DefaultAioHttpClient
    )
    assert isinstance(http_client(srv.url), openai.DefaultAioHttpClient)
    # The judge and agent read the run's config.json, where the credentials are redacted.
    for creds in ("user:pw", "[REDACTED:url_credentials]"):
        url = srv.url.replace("http://", f"http://{creds}@")
        ask = ChatRequest("fake-model", ({"role": "user", "content": f"hi {creds}"},))
        resp = build_client(settings(url), tmp_path)(ask)
        assert resp.ok and resp.text.startswith("[fake-server echo"), resp.error


def test_a_process_that_never_closes_its_client_exits_without_a_warning(fake_server, tmp_path):
    srv = fake_server()
    code = (
        "from evalkit.contracts.config import ModelConfig\n"
        "from evalkit.models import ChatRequest, make_client\n"
        f"c = make_client(ModelConfig(backend='openai', model='fake-model', base_url={srv.url!r}, cache='off'))\n"
        "print(c(ChatRequest('fake-model', ({'role': 'user', 'content': 'hi'},))).ok)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "True"
    assert done.stderr == "", done.stderr  # no "Unclosed client session" from aiohttp
