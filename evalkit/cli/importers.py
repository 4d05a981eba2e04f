"""Import verbs: ``evalkit import FORMAT|auto PATH… --out DIR`` and ``evalkit importers``."""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command


def _import_args(p):
    p.add_argument("format", help="importer name (see `evalkit importers`) or 'auto' to detect from content")
    p.add_argument("paths", nargs="+", help="files or folders to import (folders are walked)")
    p.add_argument(
        "--out", required=True, help="corpus folder to write (sessions.jsonl, facts.jsonl, manifest.json)"
    )
    p.add_argument(
        "--redact",
        action="store_true",
        help="replace API keys, tokens, private keys, home-folder user names and e-mail addresses",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="importer option, e.g. messages_column=conversation (hf)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any input file was not imported (unrecognised format) or had problems",
    )
    p.add_argument(
        "--show-issues",
        type=int,
        default=20,
        metavar="N",
        help="print the first N problems with file:line (default 20)",
    )


@command("import", "import real agent sessions (claude-code, codex, opencode, …) into a canonical corpus")
@arguments(_import_args)
def cmd_import(args) -> int:
    from evalkit.importers import IMPORTERS, import_to_corpus, load_all
    from evalkit.importers.inputs import UNRECOGNISED

    load_all()
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ValueError(f"{args.out}: --out must be a folder (the corpus is written into it), not a file")
    if args.format != "auto":
        IMPORTERS.get(args.format)  # unknown names fail here with the list of known ones
    options = {}
    for kv in args.option:
        key, sep, value = kv.partition("=")
        if not sep:
            raise ValueError(f"--option expects KEY=VALUE, got {kv!r}")
        options[key.strip()] = value
    manifest, report = import_to_corpus(args.paths, args.out, args.format, args.redact, options)
    problems = [i for i in report.issues if i.kind in ("problem", "warning")]
    for issue in problems[: args.show_issues]:
        print(issue, file=sys.stderr)
    if len(problems) > args.show_issues:
        print(
            f"… {sum(report.problems.values()) + sum(report.warnings.values()) - args.show_issues} more "
            "problems and warnings (manifest.json lists up to 500)",
            file=sys.stderr,
        )
    skipped = report.unrecognised()
    for issue in skipped[: args.show_issues]:
        print(f"skipped {issue}", file=sys.stderr)
    print(report.summary())
    st = manifest["stats"]
    print(
        f"  facts: {st['tallies']} tallies, {st['failing_commands']} failing commands, {st['constraints']} constraints"
    )
    print(f"corpus written to {args.out}")
    if not report.sessions:
        where = ", ".join(str(p) for p in args.paths)
        print(f"evalkit import: error: {where}: no session imported (problems above)", file=sys.stderr)
        return 2
    if args.strict and (report.skipped.get(UNRECOGNISED) or report.problems):
        print(
            f"--strict: {report.skipped.get(UNRECOGNISED, 0)} inputs not imported, "
            f"{sum(report.problems.values())} problems",
            file=sys.stderr,
        )
        return 1
    return 0


@command("importers", "list the session importers with what each reads")
def cmd_importers(args) -> int:
    from evalkit.importers import IMPORTERS, load_all

    load_all()
    for e in IMPORTERS:
        print(f"{e.name:12} {e.description}")
        for k, v in (e.info.get("options") or {}).items():
            print(f"{'':12}   --option {k}=…  {v}")
    return 0
