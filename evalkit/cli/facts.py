"""``evalkit facts``: derive a corpus's facts, or measure the extractor against hand labels."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evalkit.cli.commands import arguments, command, terminal_safe


def _facts_args(p):
    p.add_argument("path", nargs="?", help="canonical JSONL file or corpus folder")
    p.add_argument("--out", help="write facts.jsonl here (default: print a per-session summary)")
    p.add_argument(
        "--check",
        nargs="+",
        metavar="LABELS",
        help="label files (tests/fixtures/labels/*.json): print precision and recall per fact kind",
    )
    p.add_argument(
        "--transcripts",
        help="folder the label files' paths are relative to (default: shared/transcripts found upward)",
    )
    p.add_argument(
        "--misses", action="store_true", help="with --check: list unmatched labels and predictions"
    )


@command("facts", "derive a corpus's facts, or check the extractor against hand labels (--check LABELS)")
@arguments(_facts_args)
def cmd_facts(args) -> int:
    if args.check:
        return _check(args)
    if not args.path:
        print("error: give a corpus path, or --check LABELS", file=sys.stderr)
        return 2
    from evalkit.common.files import AtomicWriter
    from evalkit.corpus import ReadStats, read_sessions
    from evalkit.facts import compute_facts, facts_to_dict

    stats = ReadStats()
    out = AtomicWriter(args.out).__enter__() if args.out else None
    try:
        for s in read_sessions(args.path, "skip", stats):
            f = compute_facts(s)
            if out:
                out.write(json.dumps(facts_to_dict(f)) + "\n")
            else:
                print(
                    f"{terminal_safe(s.id)}: {len(f.tallies)} tallies, {len(f.failures)} failing calls, "
                    f"{len(f.constraints)} constraints, {len(f.files_modified)} files modified, "
                    f"{len(f.identifiers)} identifiers, {len(f.compactions)} recorded compactions"
                )
    finally:
        if out:
            out.close()
            Path(str(args.out) + ".tmp").replace(args.out)
    print(stats.summary(), file=sys.stderr)
    return 0


def _check(args) -> int:
    from evalkit.facts.check import check_labels, find_transcripts, format_table

    root = args.transcripts or find_transcripts()
    if root is None or not Path(root).is_dir():
        print("error: no shared/transcripts folder found; pass --transcripts DIR", file=sys.stderr)
        return 2
    results = [check_labels(p, root) for p in args.check]
    print(format_table(results))
    if args.misses:
        for r in results:
            for s in r.sessions:
                for kind in sorted(s.misses.keys() | s.extras.keys()):
                    for x in s.misses.get(kind, []):
                        print(f"MISS  {s.session} {kind}: {x}")
                    for x in s.extras.get(kind, []):
                        print(f"EXTRA {s.session} {kind}: {x}")
    return 0
