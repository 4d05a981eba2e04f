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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalkit.contracts.config import (
    INTERVALS,
    LEGACY_INTERVALS,
    RulesConfig,
    find_pyproject,
    first_error,
    read_toml,
)

__all__ = ["INTERVALS", "LEGACY_INTERVALS", "Rules", "RulesError", "parse_rules", "resolve_rules"]

VERDICTS = ("untested", "drop", "ship", "inconclusive")
DIRECTIONS = ("higher", "lower")
BUILT_IN = "(built-in defaults: no metric or candidate rules)"


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
    """Parsed ship rules; defaults live in :class:`~evalkit.contracts.config.RulesConfig`
    (``parse_rules({}, source)`` gives the built-in ones)."""

    alpha: float
    power: float
    min_sessions: int
    resamples: int
    seed: int
    max_error_share: float
    estimand: str
    interval: str  # the printed decision interval: a session bootstrap (docs/rules.md)
    baseline: str
    aa: str
    guardrails: tuple[str, ...]
    metrics: dict[str, MetricRule]
    candidates: dict[str, CandidateRule]
    source: str

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


def _amount(v: float | str) -> Amount:
    """A validated amount (:class:`~evalkit.contracts.config.MetricRuleConfig`) as an :class:`Amount`."""
    if isinstance(v, str):
        return Amount(float(v.strip()[:-1]) / 100, relative=True)
    return Amount(float(v))


def parse_rules(raw: dict[str, Any], source: str) -> Rules:
    """Validate a rules table (as read from TOML) into :class:`Rules` through
    :class:`~evalkit.contracts.config.RulesConfig`; an error is one line naming source and key path."""
    try:
        table = RulesConfig.model_validate(raw)
    except ValidationError as e:
        raise RulesError(first_error(e, RulesConfig, source)) from None
    for name, c in table.candidates.items():
        for m in (*c.success, *(c.guardrails or ())):
            if m not in table.metrics:
                raise RulesError(
                    f"{source}: candidates.{name}: metric {m!r} has no [metrics.{m}] rule (direction, margins)"
                )
    return rules_from(table, source)


def rules_from(table: RulesConfig, source: str) -> Rules:
    """The :class:`Rules` a validated rules table stands for (every default comes from the table)."""
    metrics = {
        name: MetricRule(
            name,
            m.direction,
            _amount(m.min_effect),
            _amount(m.margin),
            None if m.target is None else _amount(m.target),
        )
        for name, m in table.metrics.items()
    }
    default_guards = tuple(table.guardrails)
    candidates = {}
    for name, c in table.candidates.items():
        guards = default_guards if c.guardrails is None else tuple(c.guardrails)
        candidates[name] = CandidateRule(name, tuple(c.success), tuple(g for g in guards if g not in c.success))
    return Rules(
        alpha=table.alpha,
        power=table.power,
        min_sessions=table.min_sessions,
        resamples=table.resamples,
        seed=table.seed,
        max_error_share=table.max_error_share,
        estimand=table.estimand,
        interval="bootstrap-t" if table.interval in LEGACY_INTERVALS else table.interval,
        baseline=table.baseline,
        aa=table.aa,
        guardrails=default_guards,
        metrics=metrics,
        candidates=candidates,
        source=source,
    )


def _rules_table(path: str | os.PathLike) -> tuple[dict[str, Any], str]:
    """The raw rules table of a TOML file and its source name (see :func:`read_rules_file`)."""
    p = Path(path)
    raw = read_toml(p, "rules", RulesError)
    if "tool" in raw:
        return raw["tool"].get("evalkit", {}).get("rules", {}), f"{p}[tool.evalkit.rules]"
    if "rules" in raw and isinstance(raw["rules"], dict):
        return raw["rules"], f"{p}[rules]"
    return raw, str(p)


def read_rules_file(path: str | os.PathLike) -> Rules:
    """Rules from a TOML file: top-level keys, a ``[rules]`` table, or a pyproject's ``[tool.evalkit.rules]``."""
    raw, source = _rules_table(path)
    return parse_rules(raw, source)


def project_rules(root: str | os.PathLike | None = None) -> tuple[dict[str, Any], str] | None:
    """The ``[tool.evalkit.rules]`` table of the nearest pyproject (from ``root``, then the working
    directory, then evalkit's own source checkout) and its source name; None when there is none."""
    here = Path(__file__).resolve().parents[2]
    for start in (Path(root) if root else Path.cwd(), Path.cwd(), here):
        pp = find_pyproject(start)
        if pp is not None:
            raw = tomllib.loads(pp.read_text(encoding="utf-8"))["tool"]["evalkit"].get("rules")
            if raw:
                return raw, f"{pp}[tool.evalkit.rules]"
    return None


def extend_rules(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """``own`` rules on top of ``base``: settings and each metric's or candidate's keys replace
    the base's, tables merge by name, and the default guardrails are the union of both lists (an
    experiment adds guardrails; it drops one only with ``inherit = false``)."""
    out = {k: v for k, v in base.items() if k not in ("file", "inherit")}
    for k, v in own.items():
        if k in ("file", "inherit"):
            continue
        if k == "guardrails" and isinstance(v, list) and isinstance(out.get(k), list):
            out[k] = list(dict.fromkeys([*out[k], *v]))
        elif k in ("metrics", "candidates") and isinstance(v, dict) and isinstance(out.get(k), dict):
            merged = dict(out[k])
            for name, table in v.items():
                old = merged.get(name)
                merged[name] = (
                    {**old, **table} if isinstance(old, dict) and isinstance(table, dict) else table
                )
            out[k] = merged
        else:
            out[k] = v
    return out


def rules_table(raw: dict[str, Any] | None, source: str) -> RulesConfig:
    """A raw ``[rules]`` table (TOML, or an old run's ``config.json``) validated, errors naming ``source``."""
    try:
        return RulesConfig.model_validate(raw or {})
    except ValidationError as e:
        raise RulesError(first_error(e, RulesConfig, source)) from None


def _own(section: RulesConfig | None) -> dict[str, Any]:
    """What an experiment's rules table says itself (its unset keys come from the project's rules)."""
    return {} if section is None else section.model_dump(mode="json", exclude_unset=True)


def inherit_rules(section: RulesConfig | None, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """An experiment's rules table as it is applied: its ``file`` read, and — unless it says
    ``inherit = false`` — on top of the project's rules (:func:`extend_rules`), so its own table
    never silently drops the project's guardrails."""
    section = _own(section)
    inherit = section.pop("inherit", True)
    if "file" in section:
        f = Path(section.pop("file"))
        f = f if f.is_absolute() else Path(root or Path.cwd()) / f
        section = extend_rules(_rules_table(f)[0], section)
    if not inherit:
        return {**section, "inherit": False}  # kept, so the applied table is never extended later
    project = project_rules(root)
    return section if project is None else extend_rules(project[0], section)


def check_rule_names(rules: Rules, arms: list[str], variants: dict | None = None) -> None:
    """Unknown names are errors, not silently unjudged: every candidate of the rules is an arm
    (registered, configured, a settings variant, or a ``+`` of known ones) and every metric named
    is one a probe or the continuation stage writes."""
    from evalkit.continuation.metrics import is_continuation_metric
    from evalkit.replay.candidates import ARMS
    from evalkit.score import PROBES

    arms_known = {e.name for e in ARMS} | set(arms) | set(variants or {})
    for name in rules.candidates:
        if name not in arms_known and not all(p in arms_known for p in name.split("+")):
            raise RulesError(
                f"{rules.source}: candidates.{name}: no such arm (configured: {', '.join(arms)}; "
                "`evalkit candidates` lists the others)"
            )
    metrics_known = {m for e in PROBES for m in e.info.get("metrics", {})}
    named = [("metrics", m) for m in rules.metrics] + [("guardrails", g) for g in rules.guardrails]
    named += [
        (f"candidates.{c.name}", m) for c in rules.candidates.values() for m in (*c.success, *c.guardrails)
    ]
    for where, m in named:
        if m not in metrics_known and not is_continuation_metric(m):
            raise RulesError(
                f"{rules.source}: {where}: {m!r} is no metric a probe or the continuation writes "
                "(`evalkit probes` lists them)"
            )


def resolve_rules(section: RulesConfig | None, root: str | os.PathLike | None = None) -> Rules:
    """The rules for an experiment: its own ``rules`` table (``file = …`` points elsewhere), else the
    ``[tool.evalkit.rules]`` of the nearest pyproject (from the experiment's folder, then the working
    directory), else built-in defaults that judge no candidate (every candidate comes out untested)."""

    own_table = _own(section)
    project = project_rules(root)
    if not own_table:
        return parse_rules(*project) if project else parse_rules({}, BUILT_IN)
    if project is not None and own_table == project[0]:
        return parse_rules(*project)
    # An experiment's config already holds its rules as applied (evalkit.contracts.config.load_experiment);
    # a table given here by hand is extended the same way (extending twice changes nothing).
    own = inherit_rules(section, root)
    inherits = project is not None and own.get("inherit") is not False
    return parse_rules(own, "experiment [rules]" + (f" extending {project[1]}" if inherits else ""))
