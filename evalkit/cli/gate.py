"""The ``gate`` verb: re-decide a run under ship rules and exit by the verdicts (for CI)."""

from __future__ import annotations

import sys

from evalkit.cli.commands import arguments, command, require_run_folders


def _gate_args(p):
    p.add_argument("run", help="run folder (holds metrics.parquet)")
    p.add_argument("--rules", help="ship rules TOML (default: the run's config, else [tool.evalkit.rules])")
    p.add_argument(
        "--fail-on",
        help="verdicts that fail the gate, comma-separated, or 'none' (default: drop,untested)",
    )
    p.add_argument(
        "--require",
        action="append",
        metavar="CAND=VERDICT",
        help="a candidate that must get this verdict (e.g. head-tail=ship; alternatives with |); repeatable",
    )
    p.add_argument("--out", help="folder for gate.json, gate.md, junit.xml (default: RUN/gate)")
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="judge a run its budget stopped (incomplete.json) instead of failing it",
    )


@command(
    "gate", "CI gate: verdicts of a run under ship rules; exit 0 pass, 1 gate failed, 2 usage/data error"
)
@arguments(_gate_args)
def cmd_gate(args) -> int:
    require_run_folders(args.run, marks=("config.json", "metrics.parquet"))
    import pandas as pd

    from evalkit.decide import decide
    from evalkit.decide.gate import evaluate, parse_fail_on, parse_require, write_gate
    from evalkit.decide.rules import read_rules_file, resolve_rules, rules_table
    from evalkit.decide.stage import prompt_only_arms

    fail_on = parse_fail_on(args.fail_on)
    require = parse_require(args.require)
    from evalkit.contracts.runs import RunPaths, load_run

    # A bare metrics table is judged too: it marks a run folder for the gate.
    loaded = load_run(args.run, (RunPaths.CONFIG, RunPaths.METRICS))
    run, mpath = loaded.path, loaded.paths.metrics
    rec = None if args.allow_incomplete else loaded.incomplete
    stopped = rec.model_dump() if rec else None
    if stopped and not mpath.is_file():
        print(f"gate: FAIL: {run} is incomplete ({stopped['reason']}): {stopped['detail']}")
        return 1
    if not mpath.is_file():
        raise FileNotFoundError(f"{mpath}: no metrics table (run the score stage first)")
    df = loaded.metrics  # a corrupt or foreign table is a data error naming the file
    config = loaded.config
    where = f"{loaded.paths.root / RunPaths.CONFIG}: rules"
    rules = read_rules_file(args.rules) if args.rules else resolve_rules(rules_table(config.get("rules"), where))
    arms = list(config.get("replay", {}).get("arms", []))

    df = df.assign(arm=df["arm"].astype(str))
    have = set(df["arm"]) if len(df) else set()
    partial = []
    if len(df) == 0:
        partial.append(f"{mpath} has no rows")
    elif rules.baseline not in have:
        partial.append(f"baseline arm {rules.baseline} has no rows")
    partial += [f"configured arm {a} has no rows" for a in arms if a not in have and len(df)]
    if stopped:
        partial.append(f"the run is incomplete ({stopped['reason']}): {stopped['detail']}")
    backend = config.get("model", {}).get("backend")
    decision = decide(pd.DataFrame(df), rules, arms, prompt_only_arms(backend))
    res = evaluate(decision, str(run), fail_on, require, partial)
    paths = write_gate(decision, res, args.out or run / "gate")
    print((paths["markdown"]).read_text(encoding="utf-8"))
    for k, p in paths.items():
        print(f"gate {k}: {p}", file=sys.stderr)
    return res.exit_code
