"""Atomic file writes: a crash never leaves half a file behind. In ``contracts`` (the lowest layer)
because the run-folder records (:mod:`evalkit.contracts.runs`) are written through it."""

from __future__ import annotations

import json
import os
from pathlib import Path


class AtomicWriter:
    """Write to ``path.tmp`` and rename on success, so a crash never leaves a half file behind."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.tmp, "w", encoding="utf-8", newline="\n")
        return self.fh

    def __exit__(self, exc_type, exc, tb):
        self.fh.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)
        return False


def write_json(path: str | os.PathLike, obj) -> None:
    """Pretty, key-sorted JSON written atomically (manifests, configs, verdicts)."""
    with AtomicWriter(path) as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
