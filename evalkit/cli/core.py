"""Core verbs: run, synth, validate, facts, candidates, report (probes/score: cli.probes)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command, require_run_folders, terminal_safe


def writable_folder(path: str, setting: str) -> None:
    """ValueError naming ``setting`` unless ``path`` is (or can be made) a folder this process
    can write into; nothing is created."""
    if not str(path).strip():
        raise ValueError(f"{setting} '': empty path")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{setting} {path}: not a folder")
    existing = next(a for a in (p, *p.parents) if a.exists() or a == Path(a.anchor))
    if not existing.is_dir():
        raise ValueError(f"{setting} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{setting} {path}: {existing} is not writable")


def _run_args(p):
    p.add_argument("--config", help="experiment TOML (default: [tool.evalkit] in pyproject.toml)")
    p.add_argument("--run-dir", help="run folder (default: runs/<name>-<config hash>)")
    p.add_argument("--sessions", type=int, help="override corpus.sessions")
    p.add_argument("--arms", help="override replay.arms, comma-separated")
    p.add_argument("--resume", action="store_true", help="skip stages whose output exists in the run folder")
    p.add_argument(
        "--report-out",
        help="write the report into DIR/<name>/ instead of the run folder (make eval: reports/)",
    )
    p.add_argument("--strict", action="store_true", help="exit 2 when the run ends with warnings (for CI)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="send session content to the default public endpoint when no base_url is set",
    )
    from evalkit.cli.scale import scale_args

    scale_args(p)


@command("run", "run an experiment end to end: corpus → replay → score → decide → report")
@arguments(_run_args)
def cmd_run(args) -> int:
    from evalkit.contracts.config import load_experiment
    from evalkit.contracts.runs import RunPaths
    from evalkit.pipeline.run import prepare, run_experiment

    overrides: dict = {}
    if args.sessions is not None:
        overrides.setdefault("corpus", {})["sessions"] = args.sessions
    if args.arms:
        overrides.setdefault("replay", {})["arms"] = [a.strip() for a in args.arms.split(",") if a.strip()]
    exp = prepare(load_experiment(args.config, overrides))
    from evalkit.pipeline.endpoints import check_endpoints

    check_endpoints(exp.config, args.allow_remote)  # before any work, whichever way the run goes
    out = Path(args.report_out) / exp.name if args.report_out else None
    if args.report_out is not None:
        writable_folder(args.report_out, "--report-out")  # before any stage, not after them all
    from evalkit.cli.scale import scaled_run

    paths = scaled_run(exp, args, out)
    if paths is None:
        paths = run_experiment(
            exp, args.run_dir, args._argv, resume=args.resume, report_out=out, allow_remote=args.allow_remote
        )
    elif paths.root.joinpath(RunPaths.SHARD).is_file():
        print(paths.root)
        return 0
    print(out / "report.md" if out else paths.report)
    from evalkit.contracts.runs import read_warnings as read

    warnings = rec.warnings if (rec := read(paths.root)) else []
    if args.strict and warnings:
        print(f"evalkit run: --strict: {len(warnings)} warning(s), see above", file=sys.stderr)
        return 2
    from evalkit.contracts.exit_codes import EXIT_GATE_FAILED
    from evalkit.score.examcheck import nothing_to_judge

    why = nothing_to_judge(paths.root)  # the report is written first; the exit code says it is empty
    if why:
        print(f"evalkit run: {why}", file=sys.stderr)
        return EXIT_GATE_FAILED
    return 0


def _synth_args(p):
    p.add_argument("--sessions", type=int, default=None, help="sessions to generate (200; 40 with --compare)")
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--out", help="corpus folder to write (sessions.jsonl, facts.jsonl, manifest)")
    p.add_argument(
        "--compare",
        metavar="CORPUS",
        help="instead: print the synthetic vs real distributions against a corpus folder or transcripts folder",
    )


@command("synth", "generate a deterministic synthetic corpus whose facts are known by construction")
@arguments(_synth_args)
def cmd_synth(args) -> int:
    from evalkit.corpus import build_corpus

    if args.compare:
        from evalkit.corpus.compare import compare, load, measure, render_table
        from evalkit.corpus.synth import generate

        real = measure(load(args.compare))
        synthetic = measure(generate(args.seed, args.sessions or 40))
        print(f"seed {args.seed}")
        print(render_table(compare(synthetic, real), synthetic.sessions, real.sessions))
        return 0
    if not args.out:
        raise SystemExit("evalkit synth: --out is required (or --compare CORPUS)")
    from evalkit.contracts.config import CorpusConfig

    m = build_corpus(CorpusConfig(kind="synth", sessions=args.sessions or 200), args.seed, args.out)
    print(json.dumps(m["stats"], indent=2))
    return 0


def _validate_args(p):
    p.add_argument("path", help="canonical JSONL file or corpus folder")
    p.add_argument("--skip", action="store_true", help="skip bad records and count them instead of stopping")


@command("validate", "check a canonical JSONL corpus; errors name file:line: field: reason")
@arguments(_validate_args)
def cmd_validate(args) -> int:
    from evalkit.contracts.session import reused_call_ids
    from evalkit.corpus import CorpusError, ReadStats, read_sessions

    stats = ReadStats()
    reused = []
    try:
        for s in read_sessions(args.path, "skip" if args.skip else "raise", stats):
            if n := reused_call_ids(s.messages):
                reused.append((s.id, n))
    except CorpusError as e:
        print(terminal_safe(str(e)), file=sys.stderr)
        return 2
    for e in stats.skipped:
        print(terminal_safe(str(e)), file=sys.stderr)
    for sid, n in reused:
        print(
            terminal_safe(
                f"warning: {args.path}: session {sid}: {n} tool calls reuse an id of an earlier turn (kept)"
            ),
            file=sys.stderr,
        )
    from evalkit.pipeline.run import check_unique_ids

    src = Path(args.path)
    try:
        check_unique_ids(src / "sessions.jsonl" if src.is_dir() else src)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(stats.summary())
    return 2 if stats.skipped else 0


@command("candidates", "list every arm (baseline and candidates) with its description and evidence")
def cmd_candidates(args) -> int:
    from evalkit.replay import ARMS

    for e in ARMS:
        print(f"{e.name:18} {e.description}")
        ev = e.info.get("evidence")
        if ev and ev != "-":
            print(f"{'':18}   evidence: {ev}")
    return 0


def _report_args(p):
    p.add_argument("run", help="run folder")
    p.add_argument("--out", help="output folder (default: RUN/report)")


@command("report", "write the Markdown report of a run folder")
@arguments(_report_args)
def cmd_report(args) -> int:
    require_run_folders(args.run)
    from evalkit.report import write_report

    print(write_report(args.run, args.out))
    return 0
