"""``evalkit probes import FILE``: check a probe bank (evalkit's or hermes-agent's shape) and write
it in evalkit's own format (docs/probe-banks.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def probes_args(p) -> None:
    p.add_argument(
        "action", nargs="?", choices=["import"], help="import: check a bank and write it as evalkit.bank/1"
    )
    p.add_argument("file", nargs="?", help="the bank to import (*.probes.json or evalkit.bank/1)")
    p.add_argument("--out", help="where to write it (default: probes/banks/<name>.json)")


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
    out = Path(args.out or Path("probes") / "banks" / f"{bank_name(args.file)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(to_evalkit(questions), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    sessions = sorted({q.session for q in questions})
    kinds = {k: sum(q.kind == k for q in questions) for k in sorted({q.kind for q in questions})}
    print(
        f"{out}: {len(questions)} questions about {len(sessions)} session(s) ({', '.join(sessions)}); {kinds}"
    )
    return 0
