"""``evalkit probes import FILE``: check a probe bank (evalkit's or hermes-agent's shape) and write
it in evalkit's own format (docs/probe-banks.md): to ``--out``, into a run folder (``--run``), or
to standard output; never into the checkout's ``probes/banks/`` unless told so."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def probes_args(p) -> None:
    p.add_argument(
        "action", nargs="?", choices=["import"], help="import: check a bank and write it as evalkit.bank/1"
    )
    p.add_argument("file", nargs="?", help="the bank to import (*.probes.json or evalkit.bank/1)")
    p.add_argument("--out", help="the file to write (default: standard output)")
    p.add_argument("--run", help="a run folder: write RUN/banks/<name>.json")


def import_bank(args) -> int:
    """Validate ``args.file`` and write it in evalkit's format; errors name file, question, field."""
    from evalkit.score.banks import BankError, bank_name, load_bank, to_evalkit

    if not args.file:
        print("evalkit probes import: FILE is required", file=sys.stderr)
        return 2
    try:
        questions = load_bank(args.file)
    except BankError as e:
        print(f"evalkit probes import: {e}", file=sys.stderr)
        return 2
    if args.out and getattr(args, "run", None):
        print("evalkit probes import: give --out or --run, not both", file=sys.stderr)
        return 2
    text = json.dumps(to_evalkit(questions), indent=1, ensure_ascii=False) + "\n"
    sessions = sorted({q.session for q in questions})
    kinds = {k: sum(q.kind == k for q in questions) for k in sorted({q.kind for q in questions})}
    said = f"{len(questions)} questions about {len(sessions)} session(s) ({', '.join(sessions)}); {kinds}"
    if getattr(args, "run", None):
        run = Path(args.run)
        if not run.is_dir():
            print(f"evalkit probes import: --run {run}: no such run folder", file=sys.stderr)
            return 2
        out = run / "banks" / f"{bank_name(args.file)}.json"
    elif args.out:
        out = Path(args.out)
    else:  # standard output: the summary goes to stderr so the bank can be redirected
        sys.stdout.write(text)
        print(said, file=sys.stderr)
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"{out}: {said}")
    return 0
