"""Report verbs beyond ``evalkit report``: comparing two runs."""

from __future__ import annotations

from pathlib import Path

from evalkit.cli.commands import arguments, command


def _compare_args(p):
    p.add_argument("run_a", help="the earlier run folder (e.g. main's)")
    p.add_argument("run_b", help="the later run folder (e.g. the PR's)")
    p.add_argument("--out", help="write the Markdown to this file instead of printing it")


@command("compare", "Markdown of what changed between two runs (verdicts, effect sizes), for PR comments")
@arguments(_compare_args)
def cmd_compare(args) -> int:
    from evalkit.report.compare import render_compare

    text = render_compare(args.run_a, args.run_b)
    if args.out is not None and not args.out.strip():
        raise ValueError("compare: --out '': empty path")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(args.out)
    else:
        print(text, end="")
    return 0
