"""Report verbs beyond ``evalkit report``: comparing two runs."""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command, require_run_folders


def _compare_args(p):
    p.add_argument("run_a", help="the earlier run folder (e.g. main's)")
    p.add_argument("run_b", help="the later run folder (e.g. the PR's)")
    p.add_argument("--out", help="write the Markdown to this file instead of printing it")


@command("compare", "Markdown of what changed between two runs (verdicts, effect sizes), for PR comments")
@arguments(_compare_args)
def cmd_compare(args) -> int:
    require_run_folders(args.run_a, args.run_b)
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


def _view_args(p):
    p.add_argument("run", help="run folder")
    p.add_argument("--workers", type=int, help="processes building the session pages (default: cores)")


@command("view", "write a static viewer of a run into RUN/view/ (opens from file://, no server)")
@arguments(_view_args)
def cmd_view(args) -> int:
    run = Path(args.run)
    if not run.is_dir():
        print(f"evalkit view: {run}: no such run folder", file=sys.stderr)
        return 2
    from evalkit.report.view.build import write_view  # after the check: it loads the report stack

    try:
        index = write_view(run, args.workers)
    except FileNotFoundError as e:
        print(f"evalkit view: {e}", file=sys.stderr)
        return 2
    # The run folder's own report links its evidence to the viewer once the viewer exists.
    if (run / "report" / "report.md").is_file():
        from evalkit.report import write_report

        write_report(run)
    print(index.resolve().as_uri())
    return 0


def _export_args(p):
    p.add_argument("format", choices=["inspect"], help="inspect: Inspect AI eval logs (evalkit[inspect])")
    p.add_argument("run", help="run folder")
    p.add_argument("--out", help="output folder (default: RUN/inspect)")


@command("export", "write a run in another tool's format (inspect: Inspect AI eval logs for inspect view)")
@arguments(_export_args)
def cmd_export(args) -> int:
    run = Path(args.run)
    if not run.is_dir():
        print(f"evalkit export: {run}: no such run folder", file=sys.stderr)
        return 2
    from evalkit.report.inspect_log import export_inspect

    try:
        paths = export_inspect(run, args.out)
    except (ImportError, FileNotFoundError) as e:
        print(f"evalkit export: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0
