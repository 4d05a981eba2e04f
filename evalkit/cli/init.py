"""The ``init`` verb: a starter experiment for a folder of sessions (evalkit.pipeline.starter)."""

from __future__ import annotations

from evalkit.cli.commands import arguments, command


def _init_args(p):
    p.add_argument(
        "sessions", help="a folder of agent sessions (any importer's format) or a canonical corpus"
    )
    p.add_argument("--out", default=".", help="folder for the experiment file (and the imported corpus)")
    p.add_argument("--name", help="experiment name (default: the sessions folder's name)")


@command("init", "write a starter experiment for a folder of sessions (trigger chosen from their sizes)")
@arguments(_init_args)
def cmd_init(args) -> int:
    from evalkit.pipeline.starter import write_starter

    exp = write_starter(args.sessions, args.out, args.name)
    print(exp)
    return 0
