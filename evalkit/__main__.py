from evalkit.cli import entry

raise SystemExit(entry())
