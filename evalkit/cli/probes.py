"""Probe verbs: list the probes, re-score a run's stored events."""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command


def _probes_args(p):
    from evalkit.cli.bank import probes_args

    probes_args(p)


@command(
    "probes",
    "list probes (metrics, direction, parameters, what each catches); `probes import FILE` adds a bank",
)
@arguments(_probes_args)
def cmd_probes(args) -> int:
    from evalkit.score import PROBES

    if getattr(args, "action", None) == "import":
        from evalkit.cli.bank import import_bank

        return import_bank(args)

    for e in PROBES:
        metrics = ", ".join(f"{m} ({d})" for m, d in e.info.get("metrics", {}).items())
        params = ", ".join(f"{k}={v!r}" for k, v in e.info.get("params", {}).items()) or "none"
        print(f"{e.name:18} {e.description}")
        print(f"{'':18}   metrics: {metrics}")
        print(f"{'':18}   params:  {params}")
        print(f"{'':18}   catches: {e.info.get('catches', '')}")
    print("\n(higher)/(lower): which is better; (info): a descriptive covariate, not a score.")
    return 0


def _score_args(p):
    p.add_argument("run", help="run folder (corpus/ and events/ as `evalkit run` wrote them)")
    p.add_argument(
        "--suite", help="probe suite TOML (default: the run's [score] suite, else probes/default.toml)"
    )
    p.add_argument("--arms", help="comma-separated arms (default: every events/<arm>.jsonl)")
    p.add_argument("--workers", type=int, default=0, help="processes (default: all cores)")
    p.add_argument("--table", action="store_true", help="print the issue's check table per arm after scoring")
    p.add_argument(
        "--table-only", action="store_true", help="print the table from the existing metrics.parquet"
    )


def run_folder(run) -> Path:
    """``run`` as a Path; ValueError when it is not a run folder."""
    run = Path(run)
    if not (run / "events").is_dir() or not (run / "corpus" / "sessions.jsonl").is_file():
        raise ValueError(f"{run}: not a run folder (needs corpus/sessions.jsonl and events/)")
    return run


def scoring_inputs(run: Path, suite_arg: str | None):
    """For re-scoring a run folder (:func:`run_folder`): the probe suite and the run id its config
    gives (empty without a config). The suite is ``suite_arg`` (read from the current folder), else
    the run's ``[score] suite`` (read beside the experiment file first), else the default."""
    from evalkit.contracts.records import RunConfig
    from evalkit.contracts.runs import read_record
    from evalkit.score.suite import DEFAULT_SUITE, find_suite

    rc = read_record(run, RunConfig)
    if suite_arg:
        suite = find_suite(suite_arg)
    else:
        roots = (Path(rc.source).parent,) if rc and rc.source else ()
        suite = find_suite((rc.config if rc else {}).get("score", {}).get("suite", DEFAULT_SUITE), *roots)
    run_id = f"{rc.config.get('name', '')}-{(rc.config_hash or '')[:8]}" if rc else ""
    return suite, run_id


@command("score", "re-score a run's stored events with a probe suite (no replay, no summarizer calls)")
@arguments(_score_args)
def cmd_score(args) -> int:
    from evalkit.score import SuiteError, score_run
    from evalkit.score.stage import ScoreStats
    from evalkit.score.table import render_table

    try:
        run = run_folder(args.run)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if not args.table_only:
        try:
            suite, run_id = scoring_inputs(run, args.suite)
        except SuiteError as e:
            print(e, file=sys.stderr)
            return 2
        arms = [a.strip() for a in args.arms.split(",") if a.strip()] if args.arms else None
        stats = ScoreStats()
        from evalkit.pipeline.lock import run_lock
        from evalkit.score.judge_budget import forget

        with run_lock(run, "evalkit score"):  # one writer of metrics.parquet at a time
            n = score_run(run, arms, run_id=run_id, suite=suite, workers=args.workers, stats=stats)
            if forget(run):
                print(
                    f"{run}: judge-budget.json removed (scored at the suite's budget); `evalkit judge-budget` redoes it"
                )
        print(
            f"{run / 'metrics.parquet'}: {n} rows from {stats.events} events of {stats.sessions} sessions "
            f"(suite {suite.name}: {', '.join(suite.names())}); {len(stats.skipped)} skipped"
        )
    if args.table or args.table_only:
        print(render_table(run))
    return 0
