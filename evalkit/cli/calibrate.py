"""``evalkit calibrate``: the ship rules' error rates and power, measured on a run's own data (or simulated)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command, require_run_folders


def _calibrate_args(p):
    p.add_argument("run", nargs="?", help="run folder with metrics.parquet (not needed with --simulate)")
    p.add_argument(
        "--experiments",
        type=int,
        default=None,
        help="null experiments per comparison (default 1000; --simulate: 2000 per cell)",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=None,
        help="session bootstrap resamples and sign vectors per test (default: the rules' resamples, 10000)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed (default: the rules' seed)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: every core)")
    p.add_argument("--rules", help="ship rules TOML (default: the run's config, else [tool.evalkit.rules])")
    p.add_argument(
        "--simulate", action="store_true", help="the A/A simulation over synthetic shapes instead of a run"
    )
    p.add_argument(
        "--out",
        help="write the Markdown table here (and a .json beside it) instead of RUN/calibration.md",
    )


@command(
    "calibrate",
    "false-ship / false-drop rates and power of the ship rules, from null experiments on a run's own data",
)
@arguments(_calibrate_args)
def cmd_calibrate(args) -> int:
    from evalkit.common.progress import interactive

    if args.out is not None and (not args.out.strip() or Path(args.out).is_dir()):
        raise ValueError(f"calibrate: --out {args.out!r}: give a file name for the Markdown table")
    if args.simulate:
        from evalkit.decide import simulate as sim

        resamples, seed = args.resamples or 10_000, args.seed if args.seed is not None else 20261130
        cells = sim.simulate(
            experiments=args.experiments or 2000,
            resamples=resamples,
            seed=seed,
            workers=args.workers,
            progress=interactive(),
        )
        text = sim.table(cells, resamples=resamples, seed=seed)
        print(text, end="")
        if args.out:
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
            out.with_suffix(".json").write_text(json.dumps(sim.as_json(cells), indent=1), encoding="utf-8")
            print(out, file=sys.stderr)
        return 0
    if args.run is None:
        raise ValueError("calibrate: give a RUN folder, or --simulate")
    require_run_folders(args.run)
    from evalkit.decide.calibrate import calibrate_run

    result = calibrate_run(
        args.run,
        experiments=args.experiments or 1000,
        resamples=args.resamples,
        seed=args.seed,
        workers=args.workers,
        rules_file=args.rules,
        progress=interactive(),
        out=args.out,
    )
    print(result.markdown(), end="")
    from evalkit.contracts.runs import RunPaths

    where = Path(args.out).with_suffix(".json") if args.out else RunPaths(args.run).calibration
    print(f"calibration: {where}", file=sys.stderr)
    return 0
