"""``python -m benchmarks [--only NAME] [--out FILE]``: what ``make bench`` runs."""

from __future__ import annotations

import argparse
import sys

from benchmarks import run_benchmarks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--only", help="run only benchmarks whose name contains this")
    p.add_argument("--out", help="also write the table as JSON here")
    args = p.parse_args(argv)
    return run_benchmarks(args.only, args.out)


if __name__ == "__main__":
    sys.exit(main())
