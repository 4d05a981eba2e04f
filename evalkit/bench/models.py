"""Model-layer benchmarks against the fake server (a subprocess, real HTTP, real openai SDK).

Throughput: requests/s through ``client.map`` at concurrency 1, 16 and 64 with 100 ms server
latency, as a ratio to the ideal ``concurrency / latency``; and (``models-latency``) at real
endpoint latencies, 1 s and 5 s, with concurrency 64 and 256, with the client process's CPU
seconds per request (the openai SDK and the client, cache off). Duplicates: replay a small synthetic
corpus under every registered arm and compare calls sent (answered requests in the server's log)
with the distinct requests the events hold: 1.0 means no call was ever sent twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalkit.bench import Figure, benchmark

LATENCY_S = 0.1


def _server(log: Path, *args: str) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "fake-server", "--log", str(log), "--no-bodies", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    return p, p.stdout.readline().strip()


def _throughput(url: str, conc: int, latency: float, n: int, run_dir: Path | None) -> tuple[float, float]:
    """Requests/s through ``client.map`` for ``n`` requests after a warm-up wave of ``conc``, and
    this process's CPU seconds per request (the SDK, the client and, with ``run_dir``, the cache)."""
    from evalkit.models import ChatRequest
    from evalkit.models.client import build_client

    settings = {"backend": "openai", "model": "fake-model", "base_url": url, "concurrency": conc}
    if run_dir is None:
        settings["cache"] = "off"
    client = build_client(settings, run_dir)
    tag = f"c{conc}-l{latency:g}"
    reqs = [
        ChatRequest("fake-model", ({"role": "user", "content": f"{tag} q{i} " + "x" * 2000},))
        for i in range(conc + n)
    ]
    client.map(reqs[:conc])  # warm the connection pool
    t, cpu = time.perf_counter(), time.process_time()
    out = client.map(reqs[conc:])
    dt, cpu = time.perf_counter() - t, time.process_time() - cpu
    assert all(r.ok for r in out)
    client.close()
    return n / dt, cpu / n


@benchmark("models", "openai backend vs the fake server (100 ms): throughput at 1/16/64, duplicate calls")
def bench_models() -> list[Figure]:
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as d:
        proc, url = _server(Path(d) / "log.jsonl", "--latency", str(LATENCY_S))
        try:
            for conc in (1, 16, 64):
                rps, _ = _throughput(url, conc, LATENCY_S, max(20, conc * 10) - conc, Path(d) / f"c{conc}")
                figures.append(Figure(f"req/s at concurrency {conc}", rps, "req/s"))
                figures.append(
                    Figure(f"  ratio to ideal {conc}/{LATENCY_S:g}s", rps / (conc / LATENCY_S), "x")
                )
        finally:
            proc.terminate()
            proc.wait(10)
        figures.extend(_duplicates(Path(d)))
    return figures


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


WAVES = 3  # measured waves of requests per setting, after one warm-up wave


@benchmark(
    "models-latency",
    "openai backend vs the fake server at real latencies (1 s, 5 s): throughput at 64/256, SDK CPU per request",
)
def bench_models_latency() -> list[Figure]:
    """Real endpoints answer in 1-30 s: there, throughput is bounded by concurrency, not by the
    SDK's CPU, as long as the CPU per request times the request rate stays below the cores."""
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as d:
        for latency in (1.0, 5.0):
            proc, url = _server(Path(d) / f"log-{latency:g}.jsonl", "--latency", str(latency))
            try:
                for conc in (64, 256):
                    server_cpu = _cpu_seconds(proc.pid)
                    rps, cpu = _throughput(url, conc, latency, WAVES * conc, None)
                    # The server's CPU covers the warm-up wave too: (WAVES + 1) waves of requests.
                    server_cpu = (_cpu_seconds(proc.pid) - server_cpu) / ((WAVES + 1) * conc)
                    label = f"({conc}, {latency:g} s)"
                    figures += [
                        Figure(f"req/s at {latency:g} s latency, concurrency {conc}", rps, "req/s"),
                        Figure(f"  ratio to ideal {conc}/{latency:g}s", rps / (conc / latency), "x"),
                        Figure(f"  client CPU per request {label}", cpu * 1e3, "ms"),
                        Figure(f"  fake-server CPU per request {label}", server_cpu * 1e3, "ms"),
                    ]
            finally:
                proc.terminate()
                proc.wait(10)
    figures.append(
        Figure("load average (1 min) at the end", os.getloadavg()[0], f"on {os.cpu_count()} cores")
    )
    return figures


def _duplicates(d: Path) -> list[Figure]:
    import json

    from evalkit.corpus import build_corpus
    from evalkit.models.serverlog import answered, read_log
    from evalkit.replay import ARMS, replay_corpus

    arms = ARMS.names()
    build_corpus({"kind": "synth", "sessions": 4}, 7, d / "corpus")
    proc, url = _server(d / "dup.jsonl", "--latency", "0.01")
    try:
        model = {
            "backend": "openai",
            "model": "fake-model",
            "base_url": url,
            "cache_path": str(d / "dup.sqlite"),
        }
        replay = {"arms": arms, "window": 40_000, "reserve": 4_000, "keep_recent": 5_000, "workers": 2}
        replay_corpus(d / "corpus", d / "run", replay, model, 4)
    finally:
        proc.terminate()
        proc.wait(10)
    keys = set()
    for a in arms:
        for line in (d / "run" / "events" / f"{a}.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e["request"]:
                keys.add(e["request_key"])
    sent = len(answered(read_log(d / "dup.jsonl")))
    return [
        Figure(
            f"duplicate-call ratio ({len(arms)} arms, 4 sessions)", sent / max(1, len(keys)), "sent/unique"
        ),
        Figure("  distinct requests", len(keys), "requests"),
    ]
