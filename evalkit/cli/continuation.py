"""Continuation verbs: run continuations over a run folder, print the per-arm table."""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command


def _continue_args(p):
    p.add_argument("run", help="run folder (after replay and score)")
    p.add_argument("--agent", help="agent name (default: the run's [continuation].agent)")
    p.add_argument(
        "--max-calls", type=int, help="call budget N (default: the run's [continuation].max_calls)"
    )
    p.add_argument("--arms", help="comma-separated arms (default: the run's replay arms)")


@command("continue", "run an agent from every compaction event of a run (merges rows into metrics.parquet)")
@arguments(_continue_args)
def cmd_continue(args) -> int:
    from evalkit.continuation import run_continuation
    from evalkit.continuation.table import run_table
    from evalkit.contracts.records import RunConfig
    from evalkit.contracts.runs import read_record

    run = Path(args.run)
    info = read_record(run, RunConfig)
    if info is None:
        print(f"{run}: not a run folder (no {RunConfig.FILE})", file=sys.stderr)
        return 2
    from evalkit.contracts.config import validate_config

    config = validate_config(info.config, f"{run / RunConfig.FILE}: config")
    changes = {"agent": args.agent, "max_calls": args.max_calls}
    section = config.continuation.model_validate(
        {**config.continuation.model_dump(), **{k: v for k, v in changes.items() if v}}
    )
    arms = [a.strip() for a in args.arms.split(",")] if args.arms else list(config.replay.arms)
    run_id = f"{config.name}-{(info.config_hash or '')[:8]}"
    from evalkit.pipeline.lock import run_lock

    with run_lock(run, "evalkit continue"):  # one writer of metrics.parquet at a time
        run_continuation(run, arms, section, config.model, run_id)
    print(run_table(run))
    return 0


def _table_args(p):
    p.add_argument("run", help="run folder")


@command("continuation-table", "print the per-arm continuation table of a run folder (Markdown)")
@arguments(_table_args)
def cmd_table(args) -> int:
    from evalkit.continuation.table import run_table

    try:
        print(run_table(args.run))
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    return 0
