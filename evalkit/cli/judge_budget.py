"""``evalkit judge-budget RUN``: choose the offline judge's reading budget on held-out sessions and
re-score the run with it (``evalkit.score.judge_budget``, docs/probe-banks.md)."""

from __future__ import annotations

import sys

from evalkit.cli.commands import arguments, command


def _args(p) -> None:
    p.add_argument("run", help="run folder with the `uncompacted` arm's events (`evalkit run` wrote it)")
    p.add_argument("--suite", help="probe suite TOML (default: the run's [score] suite)")
    p.add_argument("--workers", type=int, default=0, help="processes (default: all cores)")


@command(
    "judge-budget",
    "choose the offline judge's reading budget on held-out sessions (the ceiling arm only) and re-score the run",
)
@arguments(_args)
def cmd_judge_budget(args) -> int:
    from evalkit.cli.probes import run_folder, scoring_inputs
    from evalkit.pipeline.lock import run_lock
    from evalkit.score import SuiteError, score_run
    from evalkit.score.judge_budget import calibrate, describe

    try:
        run = run_folder(args.run)
        suite, run_id = scoring_inputs(run, args.suite)
    except (SuiteError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    with run_lock(run, "evalkit judge-budget"):  # one writer of metrics.parquet at a time
        cal, scored = calibrate(run, suite, workers=args.workers)
        n = score_run(run, run_id=run_id, suite=scored, workers=args.workers)
    print(describe(cal))
    print(
        f"{run / 'metrics.parquet'}: {n} rows re-scored at the chosen budget; `evalkit report {run}` shows them"
    )
    return 0
