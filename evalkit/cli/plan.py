"""The ``plan`` verb: what a run will send and cost, before it sends anything."""

from __future__ import annotations

from pathlib import Path

from evalkit.cli.commands import arguments, command


def _plan_args(p):
    p.add_argument("--config", help="experiment TOML (default: [tool.evalkit] in pyproject.toml)")
    p.add_argument(
        "--run-dir", help="run folder (default: runs/<name>-<hash8>); its corpus and cache are used"
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        help="sessions to dry-replay, drawn at random; counts are scaled (default: every session when "
        "the corpus's MB x arms x replicates is at most 100, else as many as fit, at least 8)",
    )
    p.add_argument(
        "--summary-tokens", type=int, help="assumed summary length (default: [replay] summary_max_tokens)"
    )
    p.add_argument(
        "--answer-tokens", type=int, help="assumed judge-answer length (default: its max_tokens, 400)"
    )
    p.add_argument(
        "--grade-tokens", type=int, help="assumed judge-grade length (default: its max_tokens, 300)"
    )
    p.add_argument(
        "--pilot",
        type=int,
        default=None,
        metavar="N",
        help="answer lengths not in the call cache are measured by real calls of one arm in N sessions "
        "(at most 3N a kind), stored in the run's call cache so the run does not pay for them again "
        "(default 4 for a model endpoint)",
    )
    p.add_argument(
        "--no-pilot",
        action="store_true",
        help="send nothing: lengths from the call cache, else max_tokens (an upper bound)",
    )
    p.add_argument("--latency", type=float, default=10.0, help="assumed seconds per call (default 10)")
    p.add_argument("--backend", help="plan as if [model] backend were this (e.g. openai)")


@command("plan", "before spending: requests, tokens, cache hits, dollars and wall time per arm and stage")
@arguments(_plan_args)
def cmd_plan(args) -> int:
    from evalkit.contracts.config import load_experiment
    from evalkit.pipeline.plan import build_plan, render_plan, write_plan
    from evalkit.pipeline.plan.lengths import PILOT_CALLS
    from evalkit.pipeline.run import default_run_dir, prepare

    exp = prepare(
        load_experiment(args.config, {"model": {"backend": args.backend}} if args.backend else None)
    )
    run = Path(args.run_dir) if args.run_dir else default_run_dir(exp)
    plan = build_plan(
        exp,
        run,
        None if args.sample is None else max(1, args.sample),
        args.summary_tokens,
        args.latency,
        args.answer_tokens,
        args.grade_tokens,
        pilot=0 if args.no_pilot else (PILOT_CALLS if args.pilot is None else args.pilot),
    )
    print(render_plan(plan))
    if run.exists():
        print(f"\nplan: {write_plan(plan, run / 'plan.json')}")
    return 0
