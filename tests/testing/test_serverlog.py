"""The fake server logs a request when it arrives, so a test reads its log at once; a status
amended later (the client gave up before its answer was written) is folded into its request."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from evalkit.testing.faults import FaultPlan
from evalkit.testing.serverlog import answered, read_log


def _post(url: str, text: str, timeout: float, fault: str | None = None) -> bytes:
    body = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": text}]}).encode()
    headers = {"Content-Type": "application/json", "X-Evalkit-Request-Key": text}
    if fault:
        headers["X-Fake-Fault"] = fault
    req = urllib.request.Request(f"{url}/chat/completions", data=body, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def test_a_request_is_in_the_log_before_it_is_answered(fake_server):
    # The hung attempt is let go only after 60 s: its line can only be there now if it was
    # written on arrival.
    srv = fake_server(FaultPlan(hang_s=60.0))
    with pytest.raises((TimeoutError, socket.timeout, OSError)):
        _post(srv.url, "hung", timeout=2.0, fault="timeout")
    answer = json.loads(_post(srv.url, "plain", timeout=30.0))
    assert answer["choices"][0]["message"]["content"].endswith("plain")
    log = read_log(srv.log_path)
    assert [(e["key"], e["fault"], e["status"]) for e in log] == [("hung", "timeout", 0), ("plain", None, 200)]
    assert [e["key"] for e in answered(log)] == ["plain"]


def test_an_amended_status_is_folded_into_its_request(tmp_path):
    log = tmp_path / "server.jsonl"
    lines = [
        {"method": "POST", "key": "a", "attempt": 0, "status": 200},
        {"method": "POST", "key": "b", "attempt": 0, "status": 200},
        {"method": "GET", "path": "/v1/models", "status": 200},
        # a second server on the same log counts attempts anew: the amendment is the later one's
        {"method": "POST", "key": "a", "attempt": 0, "status": 200, "run": 2},
        {"amends": {"key": "a", "attempt": 0}, "status": -1},
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = read_log(log)
    assert [(e.get("key"), e["status"]) for e in got] == [("a", 200), ("b", 200), (None, 200), ("a", -1)]
    assert got[3]["run"] == 2
    assert [e["key"] for e in answered(got)] == ["a", "b"]
