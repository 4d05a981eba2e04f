"""What an arm's compactions are made of, as one hash: the replay's completion marker holds it.

An arm is a :class:`~evalkit.replay.compactor.Policy` resolved from its name (and from the
experiment's settings for a variant). Its fingerprint covers the policy's values (template,
guidance, instructions, flags) and the source of the code behind it: the module of every function
the policy calls (closures followed), the module of each candidate transform (a plugin's own
module included), and the replay package itself, whose engine and reference steps shape every
compaction. Edit a candidate's prompt or code and its fingerprint changes, so ``--resume``
replays it again instead of scoring stale summaries.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

_REPLAY_DIR = Path(__file__).resolve().parent


def _callables(obj: Any, seen: set[int]) -> Iterator[Callable]:
    """``obj`` and every function its closure, defaults or partial arguments hold."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, functools.partial):
        yield from _callables(obj.func, seen)
        for a in (*obj.args, *obj.keywords.values()):
            if callable(a):
                yield from _callables(a, seen)
        return
    if not callable(obj):
        return
    yield obj
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(v) or isinstance(v, tuple):
            for x in v if isinstance(v, tuple) else (v,):
                yield from _callables(x, seen)
    for d in getattr(obj, "__defaults__", None) or ():
        if callable(d):
            yield from _callables(d, seen)


def _source_file(fn: Callable) -> Path | None:
    mod = inspect.getmodule(fn)
    path = getattr(mod, "__file__", None)
    return Path(path).resolve() if path else None


def _value(v: Any) -> str:
    """A stable text for a policy value; a function stands for its qualified name (its module's
    source is hashed separately)."""
    if isinstance(v, tuple):
        return "(" + ",".join(_value(x) for x in v) + ")"
    if callable(v):
        fn = v.func if isinstance(v, functools.partial) else v
        return f"<{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}>"
    return repr(v)


@functools.lru_cache(maxsize=256)
def _file_hash(path: Path, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hash_file(path: Path) -> str:
    return _file_hash(path, path.stat().st_mtime_ns)


def arm_fingerprint(name: str, variants: dict | None = None) -> str:
    """sha256 of the arm's resolved policy and of the source it runs (see the module docstring)."""
    from evalkit.replay.candidates import ARMS
    from evalkit.replay.variants import policy_for

    policy = policy_for(name, variants)
    files: set[Path] = set(_REPLAY_DIR.glob("*.py"))
    seen: set[int] = set()
    h = hashlib.sha256()
    for f in fields(policy):
        v = getattr(policy, f.name)
        h.update(f"{f.name}={_value(v)}\n".encode())
        for x in v if isinstance(v, tuple) else (v,):
            for fn in _callables(x, seen):
                p = _source_file(fn)
                if p is not None:
                    files.add(p)
    # The transforms that built the policy: a plugin's module may hold prompts the policy only
    # reaches through a function.
    for part in _parts(name, variants):
        if part in ARMS:
            p = _source_file(ARMS.get(part))
            if p is not None:
                files.add(p)
    for p in sorted(files):
        h.update(f"{p.name}:{_hash_file(p)}\n".encode())
    return h.hexdigest()


def _parts(name: str, variants: dict | None) -> list[str]:
    """The registered arm names a (possibly variant) arm is built from."""
    if name.startswith("external:"):
        return []
    spec = (variants or {}).get(name)
    if spec is not None:
        return _parts(str(spec.get("from", "baseline")), variants)
    return [p.strip() for p in name.split("+")]


def arm_fingerprints(arms: list[str], variants: dict | None = None) -> dict[str, str]:
    """:func:`arm_fingerprint` per arm (``external:CMD`` arms are covered by their command's files)."""
    return {a: arm_fingerprint(a, variants) for a in arms if not a.startswith("external:")}
