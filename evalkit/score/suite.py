"""Probe suites: TOML files in ``probes/`` naming the probes to run and their parameters.

```toml
name = "default"
[probes.tally_present]      # one table per probe; keys are the probe's parameters
long_chars = 2000
[probes.constraints_kept]   # an empty table runs the probe with its defaults
```

``probes = ["tally_present", "constraints_kept"]`` (a plain list) is accepted too. Unknown probe
names and unknown parameters are errors naming the file and the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.contracts.config import ScoreConfig, read_toml
from evalkit.score.base import PROBES


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Suite:
    name: str
    probes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    source: str = "(built-in)"

    def names(self) -> list[str]:
        return [n for n, _ in self.probes]


def _check(source: str, name: str, params: dict[str, Any]) -> None:
    if name not in PROBES:
        raise SuiteError(f"{source}: probes.{name}: unknown probe (known: {', '.join(PROBES.names())})")
    known = PROBES.entry(name).info.get("params", {})
    for k, v in params.items():
        if k not in known:
            raise SuiteError(
                f"{source}: probes.{name}.{k}: unknown parameter (known: {', '.join(known) or 'none'})"
            )
        default = known[k]
        if (
            default is not None
            and not isinstance(v, type(default))
            and not (isinstance(default, float) and isinstance(v, int))
        ):
            raise SuiteError(
                f"{source}: probes.{name}.{k}: expected {type(default).__name__}, got {type(v).__name__}"
            )


def suite_from_dict(raw: dict, source: str = "(dict)") -> Suite:
    """Validate a parsed suite."""
    entries = raw.get("probes")
    if isinstance(entries, list):
        pairs = [(str(n), {}) for n in entries]
    elif isinstance(entries, dict):
        pairs = []
        for n, params in entries.items():
            if not isinstance(params, dict):
                raise SuiteError(f"{source}: probes.{n}: expected a table of parameters")
            pairs.append((n, dict(params)))
    else:
        raise SuiteError(f"{source}: probes: missing (a list of names or one table per probe)")
    for n, params in pairs:
        _check(source, n, params)
    return Suite(str(raw.get("name", Path(source).stem)), pairs, source)


def load_suite(path: str | os.PathLike) -> Suite:
    """Read and validate a suite file."""
    return suite_from_dict(read_toml(path, "suite", SuiteError), str(path))


DEFAULT_SUITE = ScoreConfig().suite


def find_suite(path: str | os.PathLike, *roots: Path) -> Suite:
    """Load a suite path as given, else relative to each of ``roots``, the working directory and
    the source checkout. The default suite falls back to every probe when no file is found
    (an installed package has no ``probes/`` folder); any other missing suite is an error."""
    p = Path(path)
    here = Path(__file__).resolve().parents[2]
    cands = [p] if p.is_absolute() else [r / p for r in (*roots, Path.cwd(), here)]
    for c in cands:
        if c.is_file():
            return load_suite(c)
    if Path(path).as_posix().endswith(DEFAULT_SUITE):
        return all_probes_suite()
    raise SuiteError(f"{path}: no such suite file (looked in {', '.join(str(c.parent) for c in cands)})")


def all_probes_suite() -> Suite:
    """Every registered probe with its default parameters."""
    return Suite("all", [(n, {}) for n in PROBES.names()])
