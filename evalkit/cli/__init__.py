"""The ``evalkit`` command line. Verbs are registered by modules in :mod:`evalkit.cli.commands`."""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys

from evalkit.cli.commands import COMMANDS, load_all, terminal_safe
from evalkit.common.progress import log_to_stderr
from evalkit.common.redact import redact_text
from evalkit.contracts.exit_codes import EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE
from evalkit.models.backends import EndpointUnusable, StoreFailed
from evalkit.models.client import CacheMiss

__all__ = ["EXIT_GATE_FAILED", "EXIT_OK", "EXIT_USAGE", "entry", "main"]

# Besides the exit codes of evalkit.contracts.exit_codes, a signal ends with the shell's 128 + its
# number (130 Ctrl-C, 141 closed pipe, 143 SIGTERM).


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C: the same clean-up runs (partial files
    removed, the run lock released, temporary folders deleted) instead of dying where it stood."""


def _terminate(signum, frame):
    raise Terminated


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader is gone, and flushing at exit must not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


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
    log_to_stderr()  # the library logs stage lines; the command prints them, one per stage
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_handler", None):
        parser.print_help()
        return EXIT_USAGE
    args._argv = argv
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        code = int(args._handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except KeyboardInterrupt as e:
        # Stopping already: a second Ctrl-C must not turn the way out into a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # One line, no traceback; what finished stays (resume picks it up).
        how = "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"
        hint = "; run it again with --resume to continue" if args.verb == "run" else ""
        print(f"evalkit {args.verb}: {how}{hint}", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)
    except BrokenPipeError:
        # `evalkit … | head`: the reader has what it wanted. Not 0: a gate's verdict was not read.
        _quiet_stdout()
        return 128 + signal.SIGPIPE
    except (
        ValueError,
        OSError,
        KeyError,
        sqlite3.DatabaseError,
        EndpointUnusable,
        StoreFailed,
        CacheMiss,
    ) as e:
        # Data and usage errors get one clear line (secrets redacted), not a traceback.
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        line = " ".join(f"evalkit {args.verb}: error: {msg}".split())
        print(terminal_safe(redact_text(line)), file=sys.stderr)
        return EXIT_USAGE


def entry() -> int:
    """The ``evalkit`` console script and ``python -m evalkit``: the process settings the command
    makes for itself (:func:`evalkit.cli.memory.tune_process`), then :func:`main`. Tests call
    :func:`main` in-process and keep their own settings."""
    from evalkit.cli.memory import tune_process

    tune_process()
    return main()


if __name__ == "__main__":
    raise SystemExit(entry())
