"""``client.map`` over a backend that submits to its own event loop (the openai backend; issue 18,
item 5): one thread runs the cache, single-flight, budget and accounting steps, the loop holds the
requests in flight. Each request must end exactly as a call of its own would."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from evalkit.contracts.config import ModelConfig
from evalkit.models import ChatRequest
from evalkit.models.backends import EndpointUnusable, FunctionBackend
from evalkit.models.budget import BudgetExceeded
from evalkit.models.client import ModelClient, build_client
from evalkit.models.request import ChatResponse
from evalkit.models.usage import read_ledger
from evalkit.testing.faults import FaultPlan
from evalkit.testing.serverlog import answered, read_log


def req(text: str, **kw) -> ChatRequest:
    return ChatRequest("fake-model", ({"role": "user", "content": text},), **kw)


def settings(url, **kw):
    base = {"backend": "openai", "model": "fake-model", "base_url": url, "timeout": 5.0, "concurrency": 4}
    return ModelConfig.model_validate(
        {**base, "max_retries": 1, "backoff_base": 0.01, "backoff_max": 0.02, **kw}
    )


def test_map_sends_each_distinct_request_once_and_answers_the_rest_from_cache_or_the_flight(
    fake_server, tmp_path
):
    srv = fake_server(FaultPlan(latency_s=0.5))
    # Concurrency above the batch size: every request starts while the first of each is in flight.
    client = build_client(settings(srv.url, concurrency=8), tmp_path)
    assert client.backend.submits
    first = client(req("d"))  # in the cache before the map
    batch = [req("a"), req("b"), req("a"), req("d"), req("c"), req("b")]
    out = client.map(batch)
    assert [r.text for r in out] == [client(r).text for r in batch]  # every answer now cached
    assert all(r.ok for r in out) and [r.key for r in out] == [client.key(r) for r in batch]
    assert out[3].text == first.text and out[3].cached
    assert out[2].cached and out[5].cached  # joined the in-flight call of the same request
    assert len(answered(read_log(srv.log_path))) == 4  # d, then a, b, c
    outcomes = Counter(e["outcome"] for e in read_ledger(tmp_path))
    assert outcomes["sent"] == 4 and outcomes["shared"] == 2
    assert client.stats.sent == 4 and client.stats.shared == 2


def test_map_over_budget_answers_what_fits_then_raises(fake_server, tmp_path):
    srv = fake_server()
    client = build_client(settings(srv.url, max_calls=3, concurrency=2), tmp_path)
    batch = [req(f"q{i}") for i in range(5)]
    with pytest.raises(BudgetExceeded):
        client.map(batch)
    assert len(answered(read_log(srv.log_path))) == 3
    assert client.cache.stats().calls == 3  # what was paid for is kept
    assert not client._inflight


def test_map_stops_on_an_unusable_endpoint(tmp_path):
    url = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    client = build_client(settings(url, max_retries=0, fail_fast_after=2, cache="off"), tmp_path)
    with pytest.raises(EndpointUnusable, match="cannot connect"):
        client.map([req(f"q{i}") for i in range(6)])
    failed = [e for e in read_ledger(tmp_path) if e["outcome"] == "failed"]
    # Four on the wire, a fifth started when the first failure landed; the second tripped
    # fail-fast, so the sixth was never sent. What was on the wire ended (counted) before the raise.
    assert len(failed) == 5


def test_map_errors_are_responses_and_the_first_exception_is_raised_in_input_order():
    def answer(r: ChatRequest) -> ChatResponse:
        if "boom" in r.messages[0]["content"]:
            raise RuntimeError(r.messages[0]["content"])
        return ChatResponse("ok " + r.messages[0]["content"], "fn", r.model)

    client = ModelClient(FunctionBackend("fn", answer), None, policy="off")
    client.backend.concurrency = 4
    assert not client.backend.submits  # the thread-per-request path, same contract
    with pytest.raises(RuntimeError, match="boom1"):
        client.map([req("a"), req("boom1"), req("b"), req("boom2")])
    assert [r.text for r in client.map([req("a"), req("b")])] == ["ok a", "ok b"]


def test_map_keeps_replicates_apart(fake_server, tmp_path):
    srv = fake_server()
    client = build_client(settings(srv.url, replicates=3), tmp_path)
    out = client.sample(req("same"))
    assert len({r.key for r in out}) == 3 and not any(r.cached for r in out)
    again = client.map([replace(req("same"), replicate=i) for i in range(3)])
    assert [r.text for r in again] == [r.text for r in out] and all(r.cached for r in again)


def test_a_request_that_cannot_be_keyed_fails_alone(fake_server, tmp_path):
    srv = fake_server()
    client = build_client(settings(srv.url), tmp_path)
    bad = ChatRequest("fake-model", ({"role": "user", "content": {"not", "json"}},))
    with pytest.raises(TypeError):
        client.map([req("first"), bad, req("last")])
    assert len(answered(read_log(srv.log_path))) == 2 and not client._inflight
    assert client(req("last")).cached  # the others were answered and cached
