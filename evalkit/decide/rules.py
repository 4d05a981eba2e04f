"""Ship rules: which metrics a candidate is judged on, and how (REFERENCES.md §3, Spotify's rule).

Rules are TOML: the default is ``[tool.evalkit.rules]`` in ``pyproject.toml`` (so it is part of the
default experiment's config), an experiment may carry its own ``[rules]`` table, and
``evalkit gate --rules FILE`` reads another file. The format is documented in ``docs/rules.md``.

Verdicts, first match wins: ``untested`` (a named metric missing, fewer sessions than the minimum,
a degenerate success metric, scorer errors above the threshold) → ``drop`` (a success metric
significantly worse, or a guardrail significantly worse than its margin) → ``ship`` (a success
metric significantly better than its minimum effect after Holm, and every guardrail significantly
non-inferior) → ``inconclusive``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.contracts.config import find_pyproject, read_toml

VERDICTS = ("untested", "drop", "ship", "inconclusive")
DIRECTIONS = ("higher", "lower")
LEGACY_INTERVALS = ("expanded", "percentile", "randomization")


class RulesError(ValueError):
    """Rules that cannot be used; the message names the source and the key."""


@dataclass(frozen=True)
class Amount:
    """An effect size or margin: absolute, or relative to the baseline's mean (``"10%"`` in TOML)."""

    value: float
    relative: bool = False

    def resolve(self, baseline_mean: float) -> float:
        return abs(baseline_mean) * self.value if self.relative else self.value

    def describe(self) -> str:
        return f"{self.value * 100:g}% of baseline" if self.relative else f"{self.value:g}"


@dataclass(frozen=True)
class MetricRule:
    """How one metric is read: which way is better, the effect worth shipping, the tolerated loss."""

    name: str
    direction: str
    min_effect: Amount  # used when the metric is a candidate's success metric
    margin: Amount  # used when it is a guardrail
    target: Amount | None = None  # effect for power / sessions needed (default: min effect or margin)

    @property
    def sign(self) -> int:
        """+1 when higher is better, −1 when lower is better: multiplies a difference into "better"."""
        return 1 if self.direction == "higher" else -1


@dataclass(frozen=True)
class CandidateRule:
    """The evidence a candidate claims (success metrics) and what it must not break (guardrails)."""

    name: str
    success: tuple[str, ...]
    guardrails: tuple[str, ...]


@dataclass(frozen=True)
class Rules:
    alpha: float = 0.025
    power: float = 0.8
    min_sessions: int = 20
    resamples: int = 10_000
    seed: int = 20261130
    max_error_share: float = 0.05
    estimand: str = "session_mean"
    interval: str = "t"  # the printed decision interval: clustered-SE t (the only method; see docs/rules.md)
    baseline: str = "baseline"
    aa: str = "aa"
    guardrails: tuple[str, ...] = ()
    metrics: dict[str, MetricRule] = field(default_factory=dict)
    candidates: dict[str, CandidateRule] = field(default_factory=dict)
    source: str = "(built-in defaults: no metric or candidate rules)"

    def for_candidate(self, arm: str) -> CandidateRule | None:
        """The candidate's rule; a combination ``a+b`` claims the union of its parts' evidence."""
        if arm in self.candidates:
            return self.candidates[arm]
        parts = arm.split("+")
        if len(parts) < 2 or not all(p in self.candidates for p in parts):
            return None
        success = _unique(s for p in parts for s in self.candidates[p].success)
        guards = _unique(g for p in parts for g in self.candidates[p].guardrails if g not in success)
        return CandidateRule(arm, success, guards)


def _unique(items) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


GLOBAL_KEYS = {
    "alpha": float,
    "power": float,
    "min_sessions": int,
    "resamples": int,
    "seed": int,
    "max_error_share": float,
    "estimand": str,
    "interval": str,
    "baseline": str,
    "aa": str,
}
TABLE_KEYS = {"guardrails", "metrics", "candidates", "file"}


def _amount(v: Any, where: str) -> Amount:
    if isinstance(v, bool):
        raise RulesError(f"{where}: expected a number or a percentage string, got {v!r}")
    if isinstance(v, int | float):
        if v < 0:
            raise RulesError(f"{where}: must be ≥ 0, got {v}")
        return Amount(float(v))
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            x = float(v.strip()[:-1]) / 100
        except ValueError:
            raise RulesError(f"{where}: cannot read {v!r} as a percentage") from None
        if x < 0:
            raise RulesError(f"{where}: must be ≥ 0, got {v}")
        return Amount(x, relative=True)
    raise RulesError(f"{where}: expected a number or a percentage string like '10%', got {v!r}")


def _names(v: Any, where: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise RulesError(f"{where}: expected a list of metric names, got {v!r}")
    return tuple(v)


def parse_rules(raw: dict[str, Any], source: str) -> Rules:
    """Validate a rules table (as read from TOML) into :class:`Rules`; errors name source and key."""
    unknown = set(raw) - set(GLOBAL_KEYS) - TABLE_KEYS
    if unknown:
        known = ", ".join(sorted(set(GLOBAL_KEYS) | TABLE_KEYS))
        raise RulesError(f"{source}: unknown key(s) {', '.join(sorted(unknown))} (known: {known})")
    kw: dict[str, Any] = {}
    for k, typ in GLOBAL_KEYS.items():
        if k in raw:
            v = raw[k]
            if typ is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if not isinstance(v, typ) or isinstance(v, bool):
                raise RulesError(f"{source}: {k}: expected {typ.__name__}, got {v!r}")
            kw[k] = v
    r = Rules(**kw)
    if not 0 < r.alpha < 0.5:
        raise RulesError(f"{source}: alpha: must be in (0, 0.5), got {r.alpha}")
    if not 0 < r.power < 1:
        raise RulesError(f"{source}: power: must be in (0, 1), got {r.power}")
    if r.resamples < 100:
        raise RulesError(f"{source}: resamples: at least 100, got {r.resamples}")
    if r.min_sessions < 2:
        raise RulesError(f"{source}: min_sessions: at least 2, got {r.min_sessions}")
    if not 0 <= r.max_error_share <= 1:
        raise RulesError(f"{source}: max_error_share: must be in [0, 1], got {r.max_error_share}")
    if r.estimand not in ("session_mean", "pooled"):
        raise RulesError(f"{source}: estimand: 'session_mean' or 'pooled', got {r.estimand!r}")
    # Runs written before name a bootstrap or the inverted sign-flip interval; they are re-decided with t.
    if r.interval not in ("t", *LEGACY_INTERVALS):
        raise RulesError(f"{source}: interval: 't' (the clustered-SE t interval), got {r.interval!r}")

    metrics: dict[str, MetricRule] = {}
    for name, m in (raw.get("metrics") or {}).items():
        where = f"{source}: metrics.{name}"
        if not isinstance(m, dict):
            raise RulesError(f"{where}: expected a table")
        extra = set(m) - {"direction", "min_effect", "margin", "target"}
        if extra:
            raise RulesError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        if m.get("direction") not in DIRECTIONS:
            raise RulesError(f"{where}.direction: 'higher' or 'lower', got {m.get('direction')!r}")
        metrics[name] = MetricRule(
            name,
            m["direction"],
            _amount(m.get("min_effect", 0.0), f"{where}.min_effect"),
            _amount(m.get("margin", 0.0), f"{where}.margin"),
            _amount(m["target"], f"{where}.target") if "target" in m else None,
        )
    default_guards = _names(raw.get("guardrails", []), f"{source}: guardrails")
    candidates: dict[str, CandidateRule] = {}
    for name, c in (raw.get("candidates") or {}).items():
        where = f"{source}: candidates.{name}"
        if not isinstance(c, dict):
            raise RulesError(f"{where}: expected a table")
        extra = set(c) - {"success", "guardrails"}
        if extra:
            raise RulesError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        success = _names(c.get("success", []), f"{where}.success")
        guards = _names(c["guardrails"], f"{where}.guardrails") if "guardrails" in c else default_guards
        candidates[name] = CandidateRule(name, success, tuple(g for g in guards if g not in success))
    for c in candidates.values():
        for m in (*c.success, *c.guardrails):
            if m not in metrics:
                raise RulesError(
                    f"{source}: candidates.{c.name}: metric {m!r} has no [metrics.{m}] rule (direction, margins)"
                )
    return Rules(**kw, guardrails=default_guards, metrics=metrics, candidates=candidates, source=source)


def read_rules_file(path: str | os.PathLike) -> Rules:
    """Rules from a TOML file: top-level keys, a ``[rules]`` table, or a pyproject's ``[tool.evalkit.rules]``."""
    p = Path(path)
    raw = read_toml(p, "rules", RulesError)
    if "tool" in raw:
        raw, source = raw["tool"].get("evalkit", {}).get("rules", {}), f"{p}[tool.evalkit.rules]"
    elif "rules" in raw and isinstance(raw["rules"], dict):
        raw, source = raw["rules"], f"{p}[rules]"
    else:
        source = str(p)
    return parse_rules(raw, source)


def resolve_rules(section: dict[str, Any] | None, root: str | os.PathLike | None = None) -> Rules:
    """The rules for an experiment: its own ``rules`` table (``file = …`` points elsewhere), else the
    ``[tool.evalkit.rules]`` of the nearest pyproject (from the experiment's folder, then the working
    directory), else built-in defaults that judge no candidate (every candidate comes out untested)."""

    section = dict(section or {})
    base = Path(root) if root else Path.cwd()
    if "file" in section:
        f = Path(section.pop("file"))
        return read_rules_file(f if f.is_absolute() else base / f)
    if section:
        return parse_rules(section, "experiment [rules]")
    for start in (base, Path.cwd()):
        pp = find_pyproject(start)
        if pp is not None:
            raw = tomllib.loads(pp.read_text(encoding="utf-8"))["tool"]["evalkit"].get("rules")
            if raw:
                return parse_rules(raw, f"{pp}[tool.evalkit.rules]")
    return Rules()
