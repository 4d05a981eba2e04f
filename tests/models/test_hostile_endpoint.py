"""A hostile endpoint (issue 41: items 3, 6, 7, 8, 9, 14, 17, 18, 23): what a broken proxy, a captive
portal or a misbehaving server sends, from a small loopback server of this file (the fake server
answers like a healthy API; these bodies are the point). Every case is bounded: a few requests,
loopback only. Each must end as one clear error (or a recorded warning), never a traceback, never
a cached answer that is not one, and never a prompt sent somewhere else."""

from __future__ import annotations

import gzip
import json
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from evalkit.contracts.config import ModelConfig
from evalkit.models import ChatRequest
from evalkit.models.client import build_client
from evalkit.models.usage import read_ledger
from tests.support.cli import run_cli
from tests.support.runs import tiny_corpus, write_experiment

MB = 1 << 20


def completion(text: str = "a fine summary", *, usage=None, model: str = "fake-model") -> dict:
    return {
        "id": "chatcmpl-hostile",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 3},
    }


# -- what the hostile server answers, by name -------------------------------------------------------
def ok(h, body):
    h.reply(200, json.dumps(completion()).encode())


def trickle(h, body):
    """A byte every half second: the whole answer takes ~8 s, every read well within a timeout."""
    payload = b" " * 16 + json.dumps(completion()).encode()
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(payload)))
    h.end_headers()
    for i in range(16):
        h.wfile.write(payload[i : i + 1])
        h.wfile.flush()
        time.sleep(0.5)
    h.wfile.write(payload[16:])


def html(h, body):
    h.reply(200, b"<!doctype html><html><body>Please log in to the guest network</body></html>", "text/html")


def huge(h, body):
    """100 MB of answer, chunked (no Content-Length to refuse it by)."""
    head = json.dumps(completion("@@")).encode().split(b"@@")
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    block = b"x" * MB
    for part in [head[0], *([block] * 100), head[1]]:
        h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
    h.wfile.write(b"0\r\n\r\n")


_BOMB: list[bytes] = []


def huge_error(status: int):
    """``status`` with a 100 MB body, chunked (no Content-Length to refuse it by)."""

    def answer(h, body):
        h.send_response(status)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        block = b"e" * MB
        for part in [b"upstream exploded: ", *([block] * 100)]:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        h.wfile.write(b"0\r\n\r\n")

    answer.__name__ = f"huge_error_{status}"
    return answer


def gzip_bomb(h, body):
    """A ~64 KB gzip body that inflates to 64 MB of answer."""
    if not _BOMB:
        head = json.dumps(completion("@@")).encode().split(b"@@")
        _BOMB.append(gzip.compress(head[0] + b"y" * (64 * MB) + head[1], 9))
    h.reply(200, _BOMB[0], headers={"Content-Encoding": "gzip"})


def long_answer(h, body):
    """An answer far longer than the request's max_tokens allows (100 tokens: ~400 characters)."""
    h.reply(200, json.dumps(completion("word " * 20_000)).encode())


def negative_usage(h, body):
    h.reply(
        200, json.dumps(completion(usage={"prompt_tokens": -(10**9), "completion_tokens": -(10**9)})).encode()
    )


def huge_usage(h, body):
    h.reply(200, json.dumps(completion(usage={"prompt_tokens": 2**64, "completion_tokens": 5})).encode())


def other_model(h, body):
    h.reply(200, json.dumps(completion(model="cheap-model-v0")).encode())


def snapshot(h, body):
    h.reply(200, json.dumps(completion(model="fake-model-2024-08-06")).encode())


def redirect(h, body):
    h.send_response(307)
    h.send_header("Location", h.server.elsewhere + "/chat/completions")
    h.send_header("Content-Length", "0")
    h.end_headers()


class Hostile(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.bodies: list[dict] = []  # every chat request's body, as received
        self.elsewhere = ""
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status: int, payload: bytes, ctype: str = "application/json", headers=None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.bodies.append(body)
        try:
            self.server.behaviour(self, body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up reading: what is being tested


@pytest.fixture
def hostile():
    servers: list[Hostile] = []

    def start(behaviour) -> Hostile:
        servers.append(Hostile(behaviour))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def settings(url: str, **kw) -> ModelConfig:
    return ModelConfig.model_validate(
        {
            "backend": "openai",
            "model": "fake-model",
            "base_url": url,
            "timeout": 3.0,
            "max_retries": 2,
            "backoff_base": 0.01,
            "backoff_max": 0.02,
            "fail_fast_after": 3,
            **kw,
        }
    )


def ask(text: str = "summarize this", max_tokens: int = 100) -> ChatRequest:
    return ChatRequest("fake-model", ({"role": "user", "content": text},), max_tokens=max_tokens)


def cached(run: Path) -> list[tuple]:
    p = run / "model-calls.sqlite"
    if not p.exists():
        return []
    with sqlite3.connect(p) as c:
        return c.execute("SELECT key, length(response) FROM calls").fetchall()


# -- the sweep: one request each; the error it must end in, how often it may be sent ----------------
SWEEP = [
    # item 6: [model] timeout bounds the attempt, not each read; the message says what happened
    pytest.param(trickle, "the answer was still arriving", 1, id="6-trickle"),
    # item 8: an HTML 200 names its content type and is not retried as a malformed answer forever
    pytest.param(html, "is text/html, not JSON", 3, id="8-html-200"),
    # item 3: body size, decompressed size, answer length against max_tokens
    pytest.param(huge, "oversized answer", 1, id="3-huge-body"),
    pytest.param(gzip_bomb, "oversized answer", 1, id="3-gzip-bomb"),
    pytest.param(long_answer, "characters for max_tokens=100", 1, id="3-long-answer"),
    # an error status with a huge body: read within a bound, like a 200's (retried: 5xx, 3 sends)
    pytest.param(huge_error(500), "HTTP 500 from", 3, id="41-huge-500-body"),
    pytest.param(huge_error(400), "HTTP 400 from", 1, id="41-huge-400-body"),
]


@pytest.mark.parametrize(("behaviour", "error", "sent_at_most"), SWEEP)
def test_a_hostile_answer_is_one_error_never_cached(hostile, tmp_path, behaviour, error, sent_at_most):
    srv = hostile(behaviour)
    # Fail-fast is the run's business (test_a_run_against_an_html_endpoint_...): one call here.
    retries = 0 if behaviour is trickle else 2
    client = build_client(settings(srv.url, max_retries=retries, fail_fast_after=0), tmp_path)
    resp = client(ask())
    assert not resp.ok and error in resp.error, resp.error
    assert len(resp.error) < 600 and "\n" not in resp.error
    assert len(srv.bodies) <= sent_at_most
    assert cached(tmp_path) == []  # never replayed, never sent back in a later request
    (line,) = read_ledger(tmp_path)
    assert line["outcome"] == "failed"  # recorded as an error, not as an empty answer


RSS_SCRIPT = """
import json, sys
from evalkit.models import ChatRequest
from evalkit.contracts.config import ModelConfig
from evalkit.models.client import build_client
client = build_client(ModelConfig.model_validate(json.loads(sys.argv[1])))
resp = client(ChatRequest("fake-model", ({"role": "user", "content": "hi"},), max_tokens=100))
# VmHWM, not ru_maxrss: the latter keeps the forking pytest process's peak across exec
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps([hwm, resp.error]))
"""


def _peak_rss_kb(url: str) -> tuple[int, str | None]:
    import subprocess
    import sys

    conf = settings(url, max_retries=0, fail_fast_after=0, cache="off").model_dump_json()
    done = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, conf], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return tuple(json.loads(done.stdout.splitlines()[-1]))


def test_a_huge_error_body_is_read_within_a_bound(hostile):
    """A 500 with 100 MB of body: the SDK read error bodies whole (peak RSS +100 MB or more); now
    the peak is that of a healthy call within a few MB, and the error is one line."""
    healthy, none = _peak_rss_kb(hostile(ok).url)
    hurt, error = _peak_rss_kb(hostile(huge_error(500)).url)
    assert none is None and error.startswith("failed after 1 attempts: HTTP 500 from"), error
    assert "\n" not in error and len(error) < 600
    print(f"peak RSS: healthy call {healthy / 1024:.1f} MB, 100 MB error body {hurt / 1024:.1f} MB")
    assert hurt - healthy < 8 * 1024, (healthy, hurt)


def test_an_oversized_answer_is_not_sent_back_in_the_next_request(hostile, tmp_path):
    """The judge sends the answering model's answer to the judge; a 100 KB answer must not be."""
    srv = hostile(long_answer)
    client = build_client(settings(srv.url), tmp_path)
    first = client(ask("question"))
    assert not first.ok and first.text is None
    # What a caller would send next carries no part of it.
    assert all("word word" not in json.dumps(b) for b in srv.bodies)


@pytest.mark.parametrize(
    ("behaviour", "why"),
    [
        pytest.param(negative_usage, "usage.prompt_tokens = -1000000000 is negative", id="7-negative"),
        pytest.param(huge_usage, "usage.prompt_tokens = 18446744073709551616 is over 2^63", id="7-over-2^63"),
    ],
)
def test_usage_that_is_not_a_count_is_recorded_as_invalid_and_the_answer_kept(
    hostile, tmp_path, behaviour, why
):
    srv = hostile(behaviour)
    prices = {"fake-model": {"input": 1.0, "output": 1.0}}
    client = build_client(settings(srv.url, prices=prices), tmp_path)
    resp = client(ask())
    assert resp.ok and resp.text == "a fine summary"  # the paid answer is not lost
    assert resp.usage_error == why and resp.usage == {} and resp.cost_usd is None  # unknown, not negative
    assert len(cached(tmp_path)) == 1  # stored: the next run does not pay for it again
    again = client(ask())
    assert again.cached and again.usage_error == why
    (line, hit) = read_ledger(tmp_path)
    assert line["usage_invalid"] == why and line["cost_usd"] is None and hit["outcome"] == "cache_hit"
    assert len(srv.bodies) == 1


def test_a_different_served_model_is_a_warning_and_recorded(hostile, tmp_path, capfd):
    from evalkit.common.progress import log_to_stderr

    log_to_stderr()  # as the CLI does
    srv = hostile(other_model)
    client = build_client(settings(srv.url), tmp_path)
    first, second = client(ask("one")), client(ask("two"))
    assert first.ok and first.served_model == "cheap-model-v0" and second.served_model == "cheap-model-v0"
    err = capfd.readouterr().err
    assert err.count("warning:") == 1 and "'cheap-model-v0'" in err and "'fake-model'" in err
    assert [x.get("served_model") for x in read_ledger(tmp_path)] == ["cheap-model-v0"] * 2
    # A dated snapshot of the requested model is the requested model.
    dated = build_client(settings(hostile(snapshot).url), tmp_path / "b")(ask())
    assert dated.served_model == "fake-model-2024-08-06" and capfd.readouterr().err == ""
    assert "served_model" not in read_ledger(tmp_path / "b")[0]


def test_a_cross_origin_redirect_is_not_followed_with_the_prompt(hostile, tmp_path):
    elsewhere = hostile(ok)
    srv = hostile(redirect)
    srv.elsewhere = elsewhere.url
    client = build_client(settings(srv.url), tmp_path)
    resp = client(ask("the secret prompt"))
    assert not resp.ok and "redirected to another origin" in resp.error and elsewhere.url in resp.error
    assert elsewhere.bodies == []  # the prompt never reached the other origin
    assert len(srv.bodies) == 1  # and a redirect is not retried


# -- whole runs: exit 2 with one line, nothing paid twice -------------------------------------------
def _run(tmp_path: Path, url: str, **model) -> tuple:
    corpus = tiny_corpus(tmp_path / "corpus")
    exp = write_experiment(
        tmp_path / "exp.toml",
        corpus,
        model={"backend": "openai", "model": "fake-model", "base_url": url, "backoff_base": 0.01, **model},
    )
    run = tmp_path / "run"
    return run_cli("run", "--config", str(exp), "--run-dir", str(run)), run


@pytest.mark.slow
def test_a_run_against_an_html_endpoint_stops_with_exit_2_naming_the_content_type(hostile, tmp_path):
    srv = hostile(html)
    done, _ = _run(tmp_path, srv.url)
    assert done.returncode == 2, done.stderr
    errors = [ln for ln in done.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "text/html, not JSON" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert len(srv.bodies) <= 5 + 16  # fail_fast_after, and what was already on the wire


@pytest.mark.slow
def test_negative_usage_does_not_free_the_budget(hostile, tmp_path):
    srv = hostile(negative_usage)
    # A summary's worst case (its input, 4096 tokens out) at these prices is a few $0.001: a
    # few calls fit under $0.02, not the whole run.
    prices = {"fake-model": {"input": 0.1, "output": 1.0}}
    done, run = _run(tmp_path, srv.url, prices=prices, max_cost_usd=0.02)
    assert done.returncode == 3, done.stderr  # stopped by the budget: incomplete, resumable
    assert "Traceback" not in done.stderr
    # Each call sent was reserved at its worst case and never given back: together within budget.
    from evalkit.models.budget import Budget
    from evalkit.models.prices import price_of

    budget = Budget(tmp_path / "b.sqlite", None, 0.02, price_of(prices, "fake-model"))
    worst = [
        budget.worst_case(ChatRequest("fake-model", tuple(b["messages"]), max_tokens=b["max_tokens"]))
        for b in srv.bodies
    ]
    assert len(worst) >= 1 and sum(worst) <= 0.02, worst
    usage = json.loads((run / "model-usage.json").read_text())["total"]
    assert usage["usage_invalid"] == usage["answered"] == len(srv.bodies)
    assert usage["cost_usd"] is None  # unknown, not negative
    assert len(cached(run)) == len(srv.bodies)  # the answers are kept


# -- item 9: a live cache is never written into from outside ----------------------------------------
def _cache_with(path: Path, texts: list[str]) -> Path:
    from evalkit.models.cache import CallCache
    from evalkit.models.request import ChatResponse

    cache = CallCache(path)
    for t in texts:
        r = ask(t)
        cache.put(r.key("openai", "http://x"), r, ChatResponse(f"answer {t}", "openai", "fake-model"))
    cache._conn().close()
    return path


LIVE = """
import sqlite3, sys, time
from evalkit.pipeline.lock import run_lock
root, cache = sys.argv[1], sys.argv[2]
with run_lock(root, "a running run") if root != "-" else open(cache, "rb"):
    conn = sqlite3.connect(cache, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("SELECT COUNT(*) FROM calls").fetchone()
    print("live", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def live():
    """``live(root, cache)``: another process holding ``root``'s run lock ("-": none) and the cache
    open, as a running run does; ended when the test ends."""
    import subprocess
    import sys

    procs = []

    def start(root, cache: Path) -> None:
        p = subprocess.Popen(
            [sys.executable, "-c", LIVE, str(root), str(cache)], stdout=subprocess.PIPE, text=True
        )
        procs.append(p)
        assert p.stdout.readline().strip() == "live"

    yield start
    for p in procs:
        p.kill()
        p.wait()


def _keys(path: Path) -> set[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        return {r[0] for r in c.execute("SELECT key FROM calls")}


@pytest.mark.parametrize("how", ["warm-cache", "cache-merge-into-run", "cache-merge-into-shared"])
def test_a_live_cache_is_refused_before_anything_is_written(tmp_path, live, how):
    src = _cache_with(tmp_path / "src.sqlite", ["w1", "w2", "w3"])
    run = tmp_path / "run"
    target = (tmp_path / "shared.sqlite") if how.endswith("shared") else run / "model-calls.sqlite"
    _cache_with(target, ["mine"])
    before = _keys(target)
    live("-" if how.endswith("shared") else run, target)
    if how == "warm-cache":
        exp = write_experiment(tmp_path / "exp.toml", None)
        done = run_cli("run", "--config", str(exp), "--run-dir", str(run), "--warm-cache", str(src))
        named = "in use by pid"
    else:
        done = run_cli("cache", "merge", str(src), "--out", str(target))
        named = "in use by pid" if how.endswith("run") else "open in another process"
    assert _keys(target) == before  # nothing written into the live cache
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert named in line and "Traceback" not in done.stderr


# -- item 14: a full disk stops the calls; what was stored is not paid again ------------------------
FULL_DISK = """
import json, os, sys
from pathlib import Path
from evalkit.models import ChatRequest
from evalkit.contracts.config import ModelConfig
from evalkit.models.client import build_client

disk, url = Path(sys.argv[1]), sys.argv[2]
run = disk / "run"
run.mkdir()
# freed before the second pass; leaves ~300 KB beside the 2 MB the client reserves for 4 in flight
(disk / "filler").write_bytes(os.urandom(5852 * 1024))
settings = {"backend": "openai", "model": "fake-model", "base_url": url, "concurrency": 4, "max_retries": 0}
asks = [ChatRequest("fake-model", ({"role": "user", "content": f"q{i} " + "x" * 5000},)) for i in range(100)]

def pass_(name):
    client = build_client(ModelConfig.model_validate(settings), run)
    try:
        out = client.map(asks, return_exceptions=True)  # as the judge asks
        print(json.dumps({name: "done", "failed": sum(not getattr(r, "ok", False) for r in out)}))
    except BaseException as e:  # StoreFailed
        print(json.dumps({name: "stopped", "error": str(e), "type": type(e).__name__}))
    import sqlite3
    with sqlite3.connect(run / "model-calls.sqlite") as c:
        print(json.dumps({"stored": [r[0] for r in c.execute("SELECT key FROM calls")]}), flush=True)
    client.close()

pass_("first")
(disk / "filler").unlink()
import time
print(json.dumps({"between": time.time()}), flush=True)
pass_("second")
"""


def _unshare_tmpfs_works(tmp_path: Path) -> bool:
    import shutil
    import subprocess

    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {tmp_path}"], capture_output=True
    )
    return probe.returncode == 0


@pytest.mark.slow
def test_a_full_disk_stops_sending_names_the_file_and_nothing_stored_is_paid_again(tmp_path, fake_server):
    """ENOSPC from an 8 MB tmpfs (all but ~300 KB taken by a filler file) mounted in a user
    namespace (``unshare -rm``), so real writes fail the way a full disk fails them."""
    import subprocess
    import sys

    from evalkit.testing.serverlog import settled_log

    disk = tmp_path / "disk"
    disk.mkdir()
    if not _unshare_tmpfs_works(disk):
        pytest.skip("cannot mount a tmpfs in a user namespace here")
    srv = fake_server()
    script = tmp_path / "full_disk.py"
    script.write_text(FULL_DISK)
    shell = 'mount -t tmpfs -o size=8m tmpfs "$1" && exec "$2" "$3" "$1" "$4"'
    cmd = ["unshare", "-rm", "sh", "-c", shell, "sh", str(disk), sys.executable, str(script), srv.url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    first, stored_first, between, second, stored_second = map(json.loads, done.stdout.splitlines())
    # The first pass stops at the first answer it cannot store, naming the file.
    assert first["first"] == "stopped" and first["type"] == "StoreFailed", first
    assert "run/model-calls.sqlite: disk full" in first["error"]
    assert "the answers already paid for are stored" in first["error"]
    assert "database or disk is full" in first["error"]
    stored = set(stored_first["stored"])
    assert 0 < len(stored) < 100
    log = settled_log(srv.log_path, quiet=0.5)
    sent_first = [e["key"] for e in log if e["ts"] < between["between"]]
    # Nothing was sent after the failure but what was already on the wire (concurrency 4), and
    # every answer received was stored: the space reserved beside the cache (freed at the first
    # "disk full") took the answers in flight. Before it, up to 4 of them were paid again.
    assert len(sent_first) <= len(stored) + 4, (len(sent_first), len(stored))
    print(f"answers received but not stored (paid again on resume): {len(set(sent_first) - stored)}")
    assert set(sent_first) <= stored, (len(sent_first), len(stored))
    assert not list((disk / "run").glob(".*.ballast-*"))  # the reserve is gone when the process ends
    # With room again, only what was not stored is asked again: nothing paid for twice.
    assert second == {"second": "done", "failed": 0}
    assert len(stored_second["stored"]) == 100
    resent = [e["key"] for e in log if e["ts"] >= between["between"]]
    assert not set(resent) & stored and len(resent) == 100 - len(stored)


# -- item 23: the call cache is smaller than the corpus; merge streams ------------------------------
def test_the_call_cache_stores_requests_compressed(fake_server, tmp_path):
    """A summarizer or answer request carries a whole context window: stored as it is, a run's
    cache was 8.7 times its corpus (5.4 times at the 40,000-token window of these tests)."""
    line = tiny_corpus(tmp_path / "corpus", n=1).read_text().splitlines()[0]  # a real session's JSON
    asks = [
        ChatRequest("fake-model", ({"role": "user", "content": line[: 20_000 + 5_000 * i]},))
        for i in range(12)
    ]
    client = build_client(settings(fake_server().url), tmp_path / "run")
    assert all(r.ok for r in client.map(asks))
    sent = sum(len(a.canonical()) for a in asks)
    with sqlite3.connect(tmp_path / "run" / "model-calls.sqlite") as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        stored = c.execute("SELECT SUM(length(request)) FROM calls").fetchone()[0]
    size = sum(p.stat().st_size for p in (tmp_path / "run").glob("model-calls.sqlite*"))
    assert stored < sent / 4 and size < sent / 2, (stored, size, sent)
    # Read back as they were sent.
    assert [r.text for r in client.map(asks)] == [r.text for r in client.map(asks)]
    from evalkit.models.cache import CallCache

    exported = {e["key"]: e["request"] for e in CallCache(tmp_path / "run" / "model-calls.sqlite").export()}
    assert sorted(exported.values(), key=json.dumps) == sorted((a.to_dict() for a in asks), key=json.dumps)


MERGE_RSS = """
import json, sys
from evalkit.models.cache_merge import merge_caches

def kb(field):
    return next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith(field))

base = kb("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) from here on, not the imports'
merge_caches([sys.argv[1]], sys.argv[2])
print(json.dumps({"grew_kb": kb("VmHWM:") - base}))
"""


def test_cache_merge_streams_rows_instead_of_reading_the_cache_whole(tmp_path):
    import os
    import subprocess
    import sys

    from evalkit.models.cache import SCHEMA

    src = tmp_path / "big.sqlite"
    with sqlite3.connect(src) as c:
        c.executescript(SCHEMA)
        for i in range(48):  # 48 rows of 1 MB of incompressible text: a 48 MB cache
            row = (
                f"k{i}",
                "openai",
                "u",
                "m",
                "summarize",
                0,
                os.urandom(512 * 1024).hex(),
                "{}",
                1,
                1,
                0.1,
                None,
                0.0,
            )
            c.execute("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
    done = subprocess.run(
        [sys.executable, "-c", MERGE_RSS, str(src), str(tmp_path / "out.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["grew_kb"] < 16 * 1024, done.stdout  # a row or two at a time, not 48 MB
    assert _keys(tmp_path / "out.sqlite") == {f"k{i}" for i in range(48)}


@pytest.mark.slow
def test_a_disk_full_while_scoring_exits_2_naming_the_file_and_resume_pays_nothing_twice(
    tmp_path, fake_server
):
    """The run's scoring stage (answer and judge calls) meets a full disk: a real tmpfs in a
    user namespace, filled but for ~200 KB, holding a copy of a finished run whose scoring is
    undone (its marker and its answer/judge calls removed)."""
    import os
    import shutil
    import subprocess

    from evalkit.testing.faults import load_script
    from evalkit.testing.serverlog import read_log, settled_log
    from tests.support.runs import evalkit_cmd, verdict_script

    disk = tmp_path / "disk"
    disk.mkdir()
    if not _unshare_tmpfs_works(disk):
        pytest.skip("cannot mount a tmpfs in a user namespace here")
    srv = fake_server(script=load_script(verdict_script(tmp_path)))
    done, run = _run(tmp_path, srv.url)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(run / "model-calls.sqlite", isolation_level=None) as c:
        scoring = {r[0] for r in c.execute("SELECT key FROM calls WHERE purpose IN ('answer', 'judge')")}
        c.execute("DELETE FROM calls WHERE purpose IN ('answer', 'judge')")
        c.execute("VACUUM")
    assert len(scoring) >= 8
    (run / ".done" / "score.json").unlink()
    shutil.rmtree(run / "report", ignore_errors=True)
    before = len(read_log(srv.log_path))
    resume = evalkit_cmd("run", "--config", str(tmp_path / "exp.toml"), "--run-dir", "$D/run", "--resume")
    script = (
        'mount -t tmpfs -o size=64m tmpfs "$D" && cp -a "$RUN" "$D/run" && '
        'avail=$(df --output=avail -B1 "$D" | tail -1) && '
        'head -c $((avail - 200000)) /dev/zero > "$D/filler"; '
        f"{' '.join(resume)}; echo exit=$?; "
        f'echo ---; rm "$D/filler"; {" ".join(resume)}; echo exit=$?'
    )
    env = {**os.environ, "D": str(disk), "RUN": str(run)}
    out = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=600, env=env
    )
    first, second = out.stdout.split("---")
    assert "exit=2" in first and "exit=0" in second, out.stdout + out.stderr
    errors = [ln for ln in out.stderr.splitlines() if "error" in ln]
    assert "Traceback" not in out.stderr
    # Whichever write meets the full disk first (the cache, the ledger, the metric rows), the one
    # line names its file.
    assert len(errors) == 1 and f"{disk}/run/" in errors[0], out.stderr
    assert "disk is full" in errors[0] or "No space left" in errors[0], out.stderr
    log = settled_log(srv.log_path, quiet=0.5)
    sent = [e["key"] for e in log[before:]]
    # Every scoring call was asked again once after the cache lost them, and none twice but what
    # was on the wire when the disk filled (the default concurrency, 16).
    assert set(sent) == scoring
    assert len(sent) - len(scoring) <= 16, (len(sent), len(scoring))
