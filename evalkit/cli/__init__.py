"""The ``evalkit`` command line. Verbs are registered by modules in :mod:`evalkit.cli.commands`."""

from __future__ import annotations

import argparse
import sqlite3
import sys

from evalkit.cli.commands import COMMANDS, load_all, terminal_safe
from evalkit.common.redact import redact_text
from evalkit.models.backends import EndpointUnusable
from evalkit.models.client import CacheMiss

# Exit codes, documented in the README: 0 ok, 1 gate failed, 2 usage or data error.
EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    load_all()
    parser = argparse.ArgumentParser(
        prog="evalkit",
        description="Offline evaluation harness for context-compaction strategies of coding agents.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for entry in COMMANDS:
        p = sub.add_parser(entry.name, help=entry.description, description=entry.description)
        entry.obj.add_arguments(p)
        p.set_defaults(_handler=entry.obj.handler)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_handler", None):
        parser.print_help()
        return EXIT_USAGE
    args._argv = argv
    try:
        return int(args._handler(args) or 0)
    except (ValueError, OSError, KeyError, sqlite3.DatabaseError, EndpointUnusable, CacheMiss) as e:
        # Data and usage errors get one clear line (secrets redacted), not a traceback.
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        line = " ".join(f"evalkit {args.verb}: error: {msg}".split())
        print(terminal_safe(redact_text(line)), file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
