"""Stage completion markers: what ``--resume`` trusts.

A finished stage writes ``RUN/.done/<stage>.json`` with the fingerprints (sha256, bytes, lines)
of its inputs and outputs. ``--resume`` skips a stage only when its marker exists, its inputs
are what they were (the upstream files, the config hash, the external commands' files) and its
outputs are still the files it wrote; anything else — a truncated corpus, an events file
rewritten by another replay, a marker from an older evalkit — and the stage runs again, and so
does every stage after it (their inputs changed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from pathlib import Path
from typing import Any

DONE_DIR = ".done"


def fingerprint(path: str | os.PathLike) -> dict[str, Any] | None:
    """sha256, size and line count of a file (None if it is missing)."""
    p = Path(path)
    if not p.is_file():
        return None
    h, size, lines = hashlib.sha256(), 0, 0
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    return {"sha256": h.hexdigest(), "bytes": size, "lines": lines}


def files(root: Path, paths: list[Path]) -> dict[str, Any]:
    """Fingerprints by path relative to ``root`` (absolute when outside it)."""
    out = {}
    for p in paths:
        try:
            name = str(Path(p).resolve().relative_to(root.resolve()))
        except ValueError:
            name = str(Path(p).resolve())
        out[name] = fingerprint(p)
    return out


def package_source(*packages: str) -> str:
    """sha256 over the Python source of ``packages`` (dotted names): a stage's marker holds it, so
    an edited probe or judge prompt re-runs the stage instead of keeping what the old code scored."""
    import importlib

    h = hashlib.sha256()
    for name in packages:
        root = Path(importlib.import_module(name).__file__).parent
        for f in sorted(root.rglob("*.py")):
            h.update(f"{f.relative_to(root)}\n".encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def command_files(arms: list[str]) -> dict[str, Any]:
    """Fingerprints of the files an ``external:CMD`` arm's command names (its script), so an
    edited compactor is replayed again."""
    out: dict[str, Any] = {}
    for a in arms:
        if a.startswith("external:"):
            try:
                words = shlex.split(a.split(":", 1)[1])
            except ValueError:
                continue
            for w in words:
                if os.path.isfile(w):
                    out[f"{a} :: {w}"] = fingerprint(w)
    return out


def _marker(root: Path, stage: str) -> Path:
    return root / DONE_DIR / f"{stage}.json"


def mark(
    root: Path, stage: str, inputs: dict[str, Any], outputs: list[Path], counts: dict | None = None
) -> None:
    """Record that ``stage`` finished from ``inputs`` with ``outputs``."""
    d = root / DONE_DIR
    d.mkdir(parents=True, exist_ok=True)
    body = {"stage": stage, "inputs": inputs, "outputs": files(root, outputs), "counts": counts or {}}
    tmp = _marker(root, stage).with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, _marker(root, stage))


def clear(root: Path, stage: str) -> None:
    """Forget a stage (before it runs again, so a kill mid-stage never leaves a stale marker)."""
    _marker(root, stage).unlink(missing_ok=True)


def check(root: Path, stage: str, inputs: dict[str, Any], outputs: list[Path]) -> str | None:
    """None if ``stage`` is complete for these inputs; else why it must run again."""
    p = _marker(root, stage)
    if not p.is_file():
        return "no completion marker"
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return f"unreadable completion marker {p}"
    # A marker of the wrong shape (edited, or another tool's file) is no proof of anything.
    if not (isinstance(m, dict) and isinstance(m.get("inputs"), dict) and isinstance(m.get("outputs"), dict)):
        return f"completion marker {p} is not an object with 'inputs' and 'outputs'"
    now_in = json.loads(json.dumps(inputs))
    if m.get("inputs") != now_in:
        return f"inputs changed ({', '.join(_changed(m.get('inputs') or {}, now_in))})"
    now = files(root, outputs)
    if now != m.get("outputs"):
        changed = sorted(k for k in set(now) | set(m.get("outputs", {})) if now.get(k) != m["outputs"].get(k))
        return f"outputs changed or missing ({', '.join(changed)})"
    return None


def _changed(old: dict, new: dict) -> list[str]:
    """The keys whose values differ; for a table of named parts (the arms), which parts."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and k in ("arms", "commands"):
            parts = sorted(x for x in set(a) | set(b) if a.get(x) != b.get(x))
            out.append(f"{k}: {', '.join(parts)}")
        else:
            out.append(k)
    return out
