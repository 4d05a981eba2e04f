"""Prompt variants: arms defined by settings in the experiment file, no code.

A variant starts from an arm (``from``, the baseline by default) and changes what a setting can
say: the summarizer's instructions (added to or replaced), its guidance line, the template's
section headings, the carry rule for the user's own messages, and the replay geometry of this arm
alone (``keep_recent``, ``trigger``, ``max_messages``, ``keep_messages``)::

    [replay]
    arms = ["baseline", "aa", "terse"]

    [replay.variants.terse]
    instructions_add = ["Target about 300 words; keep every command and test result verbatim."]
    keep_recent = 8000
    carry = "all-users"

The variant's settings are part of the config (and so of its hash), and its resolved policy is
part of the replay's completion marker (:mod:`evalkit.replay.fingerprint`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evalkit.replay.settings import TRIGGERS

# Policy changes: key -> what it holds.
POLICY_KEYS = {
    "from": "the arm it starts from (default baseline)",
    "description": "one line saying what the variant changes (kept with the config)",
    "instructions": "list of instructions replacing the arm's own",
    "instructions_add": "list of instructions appended to the arm's own",
    "guidance": "the line closing the summarizer's instructions",
    "template": "list of the summary's section headings, replacing the template",
    "carry": "which user messages ride verbatim: "
    + " | ".join(("first-and-latest-three", "all-users", "none")),
}
# Replay settings this arm alone uses instead of [replay]'s.
SETTING_KEYS = {"keep_recent": int, "trigger": str, "max_messages": int, "keep_messages": int}
KNOWN = {**POLICY_KEYS, **{k: k for k in SETTING_KEYS}}


def _carry_rules() -> dict[str, Any]:
    from evalkit.replay.candidates import carry_all_users
    from evalkit.replay.splice import first_and_latest_three

    return {
        "first-and-latest-three": first_and_latest_three,
        "all-users": carry_all_users,
        "none": lambda previous, new: [],
    }


def check_variants(variants: Any, where: str = "replay.variants") -> None:
    """Raise ValueError naming ``where.<name>.<key>`` for the first unusable variant setting."""
    from evalkit.replay.candidates import ARMS

    if not isinstance(variants, dict):
        raise ValueError(f"{where}: expected a table of variants")
    for name, spec in variants.items():
        at = f"{where}.{name}"
        if not isinstance(spec, dict):
            raise ValueError(f"{at}: expected a table")
        if name in ARMS or "+" in name or name.startswith("external:"):
            raise ValueError(
                f"{at}: a variant needs a name of its own (not a built-in arm or a '+' composition)"
            )
        extra = sorted(set(spec) - set(KNOWN))
        if extra:
            raise ValueError(f"{at}.{extra[0]}: unknown key (known: {', '.join(sorted(KNOWN))})")
        base = spec.get("from", "baseline")
        if not isinstance(base, str) or base == name:
            raise ValueError(f"{at}.from: {base!r}: expected the name of another arm")
        for key in ("instructions", "instructions_add", "template"):
            v = spec.get(key, [])
            if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
                raise ValueError(f"{at}.{key}: expected a list of non-empty strings, got {v!r}")
        if "template" in spec and not spec["template"]:
            raise ValueError(f"{at}.template: an empty template leaves the summary no sections")
        for key in ("guidance", "description"):
            if key in spec and not isinstance(spec[key], str):
                raise ValueError(f"{at}.{key}: expected a string, got {spec[key]!r}")
        if "carry" in spec and spec["carry"] not in _carry_rules():
            raise ValueError(f"{at}.carry: {spec['carry']!r} is not one of {', '.join(_carry_rules())}")
        for key, typ in SETTING_KEYS.items():
            if key not in spec:
                continue
            v = spec[key]
            if isinstance(v, bool) or not isinstance(v, typ):
                raise ValueError(
                    f"{at}.{key}: expected {'an integer' if typ is int else 'a string'}, got {v!r}"
                )
            if typ is int and v < (1 if key == "max_messages" else 0):
                raise ValueError(f"{at}.{key}: {v} is too small")
        if "trigger" in spec and spec["trigger"] not in TRIGGERS:
            raise ValueError(f"{at}.trigger: {spec['trigger']!r} is not one of {', '.join(TRIGGERS)}")
    for name in variants:
        _chain(name, variants, where)


def _chain(name: str, variants: dict, where: str) -> None:
    seen = [name]
    base = variants[name].get("from", "baseline")
    while base in variants:
        if base in seen:
            raise ValueError(
                f"{where}.{name}.from: variants start from each other in a loop ({' → '.join([*seen, base])})"
            )
        seen.append(base)
        base = variants[base].get("from", "baseline")


def apply_variant(policy, name: str, spec: dict):
    """``policy`` (the ``from`` arm's) changed by a variant's settings."""
    changes: dict[str, Any] = {"name": name}
    if "instructions" in spec:
        changes["instructions"] = tuple(spec["instructions"])
    if spec.get("instructions_add"):
        changes["instructions"] = (
            *changes.get("instructions", policy.instructions),
            *spec["instructions_add"],
        )
    if "guidance" in spec:
        changes["guidance"] = spec["guidance"]
    if "template" in spec:
        changes["template"] = tuple(spec["template"])
    if "carry" in spec:
        changes["carry_users"] = _carry_rules()[spec["carry"]]
    return replace(policy, **changes)


def settings_for(settings, arm: str, variants: dict | None):
    """The replay settings of ``arm``: [replay]'s, with the variant's own geometry (its ``from``
    chain's first)."""
    spec = (variants or {}).get(arm)
    if spec is None:
        return settings
    inherited = settings_for(settings, str(spec.get("from", "baseline")), variants)
    own = {k: spec[k] for k in SETTING_KEYS if k in spec}
    return replace(inherited, **own) if own else inherited


def policy_for(name: str, variants: dict | None = None) -> Any:
    """The policy of an arm: a variant defined by settings (``[replay.variants.NAME]``, built on
    the arm its ``from`` names), or a built-in arm (:func:`evalkit.replay.candidates.policy_for`)."""
    from evalkit.replay import candidates

    if variants and name in variants:
        spec = variants[name]
        return apply_variant(policy_for(str(spec.get("from", "baseline")), variants), name, spec)
    return candidates.policy_for(name)


def check_arm(name: str, variants: dict | None = None) -> None:
    """Raise early (before any replay work) for an arm that cannot be built."""
    policy_for(name, variants)
