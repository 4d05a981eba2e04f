"""Model-layer benchmarks against the fake server (a subprocess, real HTTP, real openai SDK).

Throughput: requests/s through ``client.map`` at concurrency 1, 16 and 64 with 100 ms server
latency, as a ratio to the ideal ``concurrency / latency``. Duplicates: replay a small synthetic
corpus under every registered arm and compare calls sent (answered requests in the server's log)
with the distinct requests the events hold: 1.0 means no call was ever sent twice.
"""

from __future__ import annotations

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


@benchmark("models", "openai backend vs the fake server (100 ms): throughput at 1/16/64, duplicate calls")
def bench_models() -> list[Figure]:
    from evalkit.models import ChatRequest
    from evalkit.models.client import build_client

    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as d:
        proc, url = _server(Path(d) / "log.jsonl", "--latency", str(LATENCY_S))
        try:
            for conc in (1, 16, 64):
                client = build_client(
                    {"backend": "openai", "model": "fake-model", "base_url": url, "concurrency": conc},
                    Path(d) / f"c{conc}",
                )
                n = max(20, conc * 10)
                reqs = [
                    ChatRequest("fake-model", ({"role": "user", "content": f"c{conc} q{i} " + "x" * 2000},))
                    for i in range(n)
                ]
                client.map(reqs[:conc])  # warm the connection pool
                t = time.perf_counter()
                out = client.map(reqs[conc:])
                dt = time.perf_counter() - t
                assert all(r.ok for r in out)
                rps = (n - conc) / dt
                figures.append(Figure(f"req/s at concurrency {conc}", rps, "req/s"))
                figures.append(
                    Figure(f"  ratio to ideal {conc}/{LATENCY_S:g}s", rps / (conc / LATENCY_S), "x")
                )
                client.close()
        finally:
            proc.terminate()
            proc.wait(10)
        figures.extend(_duplicates(Path(d)))
    return figures


def _duplicates(d: Path) -> list[Figure]:
    import json

    from evalkit.corpus import build_corpus
    from evalkit.models.fakeserver import answered, read_log
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
