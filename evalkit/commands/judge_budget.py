"""``evalkit judge-budget RUN``: choose the offline judge's reading budget on held-out sessions and
re-score the run with it (``evalkit.probes.judge_budget``, docs/probe-banks.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evalkit.commands import arguments, command


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
    from evalkit.probes import score_run
    from evalkit.probes.judge_budget import calibrate, describe
    from evalkit.probes.suite import DEFAULT_SUITE, find_suite
    from evalkit.runlock import run_lock

    run = Path(args.run)
    if not (run / "events").is_dir() or not (run / "corpus" / "sessions.jsonl").is_file():
        print(f"{run}: not a run folder (needs corpus/sessions.jsonl and events/)", file=sys.stderr)
        return 2
    cfg = json.loads((run / "config.json").read_text()) if (run / "config.json").is_file() else {}
    source = Path(cfg.get("source") or ".").parent
    suite = find_suite(
        args.suite or cfg.get("config", {}).get("score", {}).get("suite", DEFAULT_SUITE), source
    )
    run_id = f"{cfg['config'].get('name', '')}-{cfg.get('config_hash', '')[:8]}" if cfg else ""
    with run_lock(run, "evalkit judge-budget"):  # one writer of metrics.parquet at a time
        cal, scored = calibrate(run, suite, workers=args.workers)
        n = score_run(run, run_id=run_id, suite=scored, workers=args.workers)
    print(describe(cal))
    print(
        f"{run / 'metrics.parquet'}: {n} rows re-scored at the chosen budget; `evalkit report {run}` shows them"
    )
    return 0
