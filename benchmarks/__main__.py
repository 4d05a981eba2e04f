"""``python -m benchmarks [--only NAME] [--out FILE]``: what ``make bench`` runs.

With ``--ref COMMIT`` (``make bench REF=COMMIT``) it instead runs the default experiment side by
side with that commit and prints the ratios #35 asks for (benchmarks.reference)."""

from __future__ import annotations

import argparse
import sys

from benchmarks import run_benchmarks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--only", help="run only benchmarks whose name contains this")
    p.add_argument("--out", help="also write the table as JSON here")
    ref = p.add_argument_group("side by side with a reference commit")
    ref.add_argument("--ref", help="commit to compare this checkout with (e.g. 1656aa3)")
    ref.add_argument("--reps", type=int, default=3, help="alternating runs of each tree (default 3)")
    ref.add_argument("--sessions", type=int, help="override corpus.sessions (default: the experiment's)")
    ref.add_argument("--tests", action="store_true", help="also time `make test` in both trees (long)")
    ref.add_argument(
        "--keep-ref", action="store_true", help="keep the reference's tree and venv for next time"
    )
    args = p.parse_args(argv)
    if args.ref:
        from benchmarks.reference import run_reference

        return run_reference(args.ref, args.reps, args.sessions, args.tests, args.keep_ref)
    return run_benchmarks(args.only, args.out)


if __name__ == "__main__":
    sys.exit(main())
