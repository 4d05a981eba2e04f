"""Model-layer verbs: ``cache stats|prune|export`` and ``fake-server``."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command


def _cache_file(args) -> Path:
    """The cache a ``cache`` verb acts on: a .sqlite file, a run folder, or the experiment's."""
    from evalkit.models.backends import cache_path

    if args.target:
        t = Path(args.target)
        return t / "model-calls.sqlite" if t.is_dir() else t
    from evalkit.contracts.config import load_experiment
    from evalkit.pipeline.run import default_run_dir

    exp = load_experiment(args.config)
    return Path(cache_path(exp.config.model, default_run_dir(exp)) or "")


def _cache_args(p):
    p.add_argument("action", choices=["stats", "prune", "export", "merge"])
    p.add_argument(
        "target", nargs="?", help="a run folder or a .sqlite cache file (default: the experiment's cache)"
    )
    p.add_argument("more", nargs="*", help="merge: further cache files or run folders (commands.scale)")
    p.add_argument("--config", help="experiment TOML whose cache to use (default: [tool.evalkit])")
    p.add_argument("--older-than", type=float, metavar="DAYS", help="prune: only calls older than this")
    p.add_argument("--backend", help="prune: only this backend's calls")
    p.add_argument("--model", help="prune: only this model's calls")
    p.add_argument("--all", action="store_true", help="prune: allow deleting every call (no filter)")
    p.add_argument("--out", help="export: write JSONL here instead of stdout; merge: the cache to add to")


@command("cache", "inspect or maintain the model-call cache: stats | prune | export | merge")
@arguments(_cache_args)
def cmd_cache(args) -> int:
    from evalkit.models.cache import CallCache

    if args.action == "merge":
        from evalkit.cli.scale import cache_merge

        return cache_merge([args.target, *args.more], args.out)

    path = _cache_file(args)
    if not path.is_file():
        print(f"evalkit cache: no cache file at {path}", file=sys.stderr)
        return 2
    cache = CallCache(path)
    if args.action == "stats":
        s = cache.stats()
        print(f"{s.path}: {s.calls} calls, {s.bytes / 1e6:.2f} MB")
        for backend, model, n, tin, tout, cost in s.by_backend_model:
            print(f"  {backend:10} {model:28} {n:8} calls {tin:>12,} in {tout:>10,} out  ${cost:,.4f}")
        return 0
    if args.action == "prune":
        if not (args.older_than is not None or args.backend or args.model or args.all):
            print(
                "evalkit cache prune: name a filter (--older-than, --backend, --model) or --all",
                file=sys.stderr,
            )
            return 2
        older = args.older_than * 86400 if args.older_than is not None else None
        n = cache.prune(older, args.backend, args.model)
        print(f"pruned {n} calls from {path}")
        return 0
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    try:
        n = 0
        for row in cache.export():
            out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    finally:
        if args.out:
            out.close()
    print(f"exported {n} calls", file=sys.stderr)
    return 0


def _interrupt(*_):
    raise KeyboardInterrupt


def _fake_args(p):
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on the first line)")
    p.add_argument("--script", help="JSON list or JSONL of rules {match|regex, reply, tool_calls}")
    p.add_argument("--log", help="append every request to this JSONL file")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME=RATE",
        help="fault rate per request: latency, 429, 500, drop, timeout, malformed, empty, refusal",
    )
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    p.add_argument("--fault-latency", type=float, default=1.0, help="extra seconds of the latency fault")
    p.add_argument("--retry-after", default="1", help="Retry-After header of the 429 fault")
    p.add_argument("--hang", type=float, default=30.0, help="seconds the timeout fault holds a connection")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-bodies", action="store_true", help="log request metadata only, not bodies")
    p.add_argument("--batch-delay", type=float, default=0.2, help="seconds a batch stays in_progress")
    p.add_argument(
        "--batch-fail", type=float, default=0.0, help="share of batch lines that fail (error file)"
    )
    p.add_argument(
        "--batch-expire",
        default="",
        metavar="N,...",
        help="batches (1-based creation order) that expire half done",
    )


@command(
    "fake-server", "serve a fake OpenAI-compatible endpoint on 127.0.0.1 with scripted answers and faults"
)
@arguments(_fake_args)
def cmd_fake_server(args) -> int:
    from evalkit.testing.fakeserver import FakeServer
    from evalkit.testing.faults import FaultPlan, load_script

    rates = {}
    for spec in args.fault:
        name, _, rate = spec.partition("=")
        try:
            rates[name.strip()] = float(rate)
        except ValueError:
            raise ValueError(f"--fault {spec!r}: expected NAME=RATE, e.g. 429=0.1") from None
    plan = FaultPlan(rates, args.latency, args.fault_latency, args.retry_after, args.hang, args.seed)
    script = load_script(args.script) if args.script else []
    from evalkit.testing.fakebatch import BatchFaults

    expire = tuple(int(x) for x in args.batch_expire.split(",") if x.strip())
    batch = BatchFaults(args.batch_delay, args.batch_fail, expire, args.seed)
    server = FakeServer(
        plan, script, args.log, args.host, args.port, log_bodies=not args.no_bodies, batch=batch
    )
    print(server.url, flush=True)
    # SIGTERM ends the server cleanly (the log is flushed per line anyway).
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0
