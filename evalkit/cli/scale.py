"""Verbs for runs past one machine: ``merge`` (shard folders → a run); ``cache merge`` lands here."""

from __future__ import annotations

import sys

from evalkit.cli.commands import arguments, command


def scale_args(p) -> None:
    """``evalkit run``'s options for runs past one machine (docs/scale.md)."""
    p.add_argument(
        "--shard", metavar="K/N", help="run the per-session stages on shard K of N only (then evalkit merge)"
    )
    p.add_argument("--executor", help="where the shards run: local | ray (default: [executor] kind)")
    p.add_argument(
        "--shards", type=int, help="how many shards the executor runs (default: [executor] shards)"
    )
    p.add_argument(
        "--warm-cache",
        action="append",
        metavar="CACHE",
        help="copy the calls of this read-only cache into the run's own before it starts (repeatable)",
    )


def scaled_run(exp, args, report_out):
    """The run when a scale option is in play (a shard, an executor, a warm cache); None otherwise."""
    from pathlib import Path

    from evalkit.pipeline.executors import run_with_executor, settings_from
    from evalkit.pipeline.run import RunPaths, default_run_dir, run_experiment
    from evalkit.pipeline.shard import Shard

    settings = settings_from(exp)
    shard = Shard.parse(args.shard) if args.shard else None
    kind = args.executor or settings.kind
    if (kind == "local" and int(args.shards or settings.shards or 0) <= 1) or shard:
        if args.warm_cache:  # into the run's (or shard's) own cache, before it starts
            from evalkit.models.backends import cache_path
            from evalkit.models.cache_merge import check_sources, merge_caches

            check_sources(args.warm_cache)  # a missing or junk cache leaves no run folder behind
            root = Path(args.run_dir) if args.run_dir else default_run_dir(exp)
            if shard and not args.run_dir:
                root = root.with_name(f"{root.name}-{shard.name}")
            from evalkit.pipeline.lock import run_lock

            # Under the run's lock: a running run's cache is not written into behind its back.
            with run_lock(root, "evalkit run --warm-cache"):
                merge_caches(args.warm_cache, cache_path(exp.config.model, root))
        if not shard:
            return None
        return run_experiment(
            exp, args.run_dir, args._argv, resume=args.resume, shard=shard, allow_remote=args.allow_remote
        )
    paths = run_with_executor(exp, args.run_dir, args._argv, kind, args.shards, args.warm_cache)
    if report_out:
        from evalkit.pipeline.run import stage_report

        stage_report(exp, paths, Path(report_out))
    return RunPaths(paths.root)


def _merge_args(p):
    p.add_argument("shards", nargs="+", help="shard run folders (evalkit run --shard K/N)")
    p.add_argument("--out", required=True, help="the run folder to build")


@command("merge", "merge shard run folders into one run folder, then decide and report (docs/scale.md)")
@arguments(_merge_args)
def cmd_merge(args) -> int:
    from evalkit.pipeline.merge import merge_shards

    out = merge_shards(args.shards, args.out, ["merge", *args._argv[1:]] if args._argv else None)
    print(out / "report" / "report.md")
    return 0


def cache_merge(sources: list[str | None], out: str | None) -> int:
    """``evalkit cache merge A B ... --out C`` (a run folder stands for its model-calls.sqlite)."""
    from contextlib import nullcontext
    from pathlib import Path

    from evalkit.models.cache_merge import merge_caches
    from evalkit.pipeline.lock import LOCK_NAME, run_lock

    files = [Path(s) / "model-calls.sqlite" if Path(s).is_dir() else Path(s) for s in sources if s]
    if not files or not out:
        print("evalkit cache merge: name the caches to join and --out", file=sys.stderr)
        return 2
    # --out inside a run folder: hold its lock, so a running run's cache is refused (naming the
    # run) before anything is written; merge_caches refuses any other cache open elsewhere.
    folder = Path(out).parent
    with run_lock(folder, "evalkit cache merge") if (folder / LOCK_NAME).exists() else nullcontext():
        added = merge_caches(files, out)
    for src, n in added.items():
        print(f"{src}: {n} new calls", file=sys.stderr)
    print(f"{out}: {sum(added.values())} calls added")
    return 0
