"""Checks of a resolved experiment before anything is written: unknown keys inside sections
(typos), secrets in the config, and values no stage could use. Each failure is one
:class:`ConfigError` naming the file and the key (re-exported by :mod:`evalkit.contracts.config`,
which calls :func:`check_config` with its defaults)."""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and the key."""


# Sections whose keys are free-form (rule overrides) or checked by their own stage.
_FREE = {"rules"}
# Tables inside a section whose keys are user data (model names), not settings.
_FREE_TABLES = {("model", "prices")}
# Keys a stage reads without a default in config.DEFAULTS (unset means "off"): adding them to
# DEFAULTS would change every existing run's config hash.
_OPTIONAL = {
    "model": {"max_calls", "max_cost_usd", "batch", "batch_fallback", "batch_poll_s", "batch_max_rounds"},
    "replay": {"request_layout"},
    "corpus": {"session_tokens"},
    # evalkit.score.banks: question banks scored with the suite; evalkit.score.judge_budget
    "score": {"banks", "judge_budget"},
    "continuation": {"max_tokens", "workers"},  # evalkit.continuation.stage.DEFAULTS
}
# A key that holds a secret is refused wherever it appears: the resolved config is copied into
# the run folder (config.json), so a secret there would reach disk.
_SECRET_KEYS = {"api_key", "apikey", "api-key", "token", "password", "secret", "authorization"}


def _walk(d: dict, path: tuple[str, ...] = ()):
    for k, v in d.items():
        yield (*path, str(k)), v
        if isinstance(v, dict):
            yield from _walk(v, (*path, str(k)))


def _int(cfg: dict, source: str, section: str, key: str, minimum: int) -> int:
    v = cfg[section].get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(source, f"{section}.{key}", f"{v!r} is not an integer")
    if v < minimum:
        raise _err(source, f"{section}.{key}", f"{v} is below {minimum}")
    return v


def _err(source: str, key: str, why: str):
    return ConfigError(f"{source}: {key}: {why}")


def check_config(raw: dict, cfg: dict[str, Any], source: str, defaults: dict[str, Any]) -> None:
    """Raise ConfigError for the first problem found in ``cfg`` (``raw`` is what the file said;
    ``defaults``: every known section and key, ``config.DEFAULTS``)."""

    for path, _ in _walk(raw):
        if path[-1].lower() in _SECRET_KEYS and tuple(path[:2]) not in _FREE_TABLES:
            raise _err(
                source,
                ".".join(path),
                "secrets are not read from the config (it is copied into the run folder); "
                "set the environment variable named by [model] api_key_env (default OPENAI_API_KEY)",
            )
    for section, default in defaults.items():
        given = cfg.get(section)
        if isinstance(default, dict):
            if not isinstance(given, dict):
                raise _err(source, section, f"expected a table, got {type(given).__name__}")
            if section in _FREE or not default:
                continue
            _unknown(source, section, given, default)
            _types(source, section, given, default)
    model_keys = defaults["model"]
    cont_model = cfg["continuation"].get("model")
    if not isinstance(cont_model, dict):
        raise _err(source, "continuation.model", "expected a table")
    _unknown(source, "continuation.model", cont_model, model_keys)
    _types(source, "continuation.model", cont_model, model_keys)

    r = cfg["replay"]
    window = _int(cfg, source, "replay", "window", 1)
    reserve = _int(cfg, source, "replay", "reserve", 0)
    keep = _int(cfg, source, "replay", "keep_recent", 0)
    for key in ("summary_max_tokens", "max_messages"):
        _int(cfg, source, "replay", key, 1)
    for key in ("workers", "keep_messages", "summary_source_chars"):
        _int(cfg, source, "replay", key, 0)
    if reserve >= window:
        raise _err(source, "replay.reserve", f"{reserve} leaves no room in a window of {window}")
    if keep >= window - reserve:
        raise _err(
            source,
            "replay.keep_recent",
            f"{keep} ≥ the trigger threshold window - reserve = {window - reserve}",
        )
    arms = r.get("arms")
    if not isinstance(arms, list) or not arms or not all(isinstance(a, str) and a.strip() for a in arms):
        raise _err(source, "replay.arms", f"{arms!r}: expected a non-empty list of arm names")
    if len(set(arms)) != len(arms):
        raise _err(source, "replay.arms", f"{arms!r}: an arm is listed twice")
    if not isinstance(r.get("external_timeout"), int | float) or r["external_timeout"] <= 0:
        raise _err(source, "replay.external_timeout", f"{r.get('external_timeout')!r}: expected seconds > 0")
    if "judge_budget" in cfg["score"] and "uncompacted" not in arms:
        raise _err(
            source, "score.judge_budget", 'calibrating needs the ceiling arm "uncompacted" in replay.arms'
        )
    if cfg["score"].get("judge_budget", "calibrate") != "calibrate":
        raise _err(
            source, "score.judge_budget", f'{cfg["score"]["judge_budget"]!r}: the only value is "calibrate"'
        )
    if cfg["corpus"].get("kind") == "synth":
        _int(cfg, source, "corpus", "sessions", 1)
    _int(cfg, source, "model", "replicates", 1)
    _int(cfg, source, "model", "concurrency", 1)
    _int(cfg, source, "model", "max_retries", 0)
    _int(cfg, source, "model", "fail_fast_after", 0)
    for key in ("timeout", "backoff_base", "backoff_max"):
        v = cfg["model"].get(key)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise _err(source, f"model.{key}", f"{v!r}: expected a number ≥ 0")
    if not isinstance(cfg.get("seed"), int) or isinstance(cfg.get("seed"), bool):
        raise _err(source, "seed", f"{cfg.get('seed')!r} is not an integer")
    if not isinstance(cfg.get("name"), str) or not cfg["name"].strip() or "/" in cfg["name"]:
        raise _err(source, "name", f"{cfg.get('name')!r}: expected a non-empty name without '/'")


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a table"
    return type(v).__name__


def _types(source: str, section: str, given: dict, known: dict) -> None:
    """Each value has its default's type (an integer where a number is expected is fine)."""
    for k, default in known.items():
        if k not in given:
            continue
        v, want = given[k], _kind(default)
        if _kind(v) != want:
            raise _err(source, f"{section}.{k}", f"{v!r} is {_kind(v)}, expected {want}")
        if (
            isinstance(default, int)
            and not isinstance(default, bool)
            and isinstance(v, float)
            and not v.is_integer()
        ):
            raise _err(source, f"{section}.{k}", f"{v!r} is not an integer")
        if isinstance(default, int | float) and not isinstance(default, bool) and v != v:
            raise _err(source, f"{section}.{k}", "NaN is not a value")


def _unknown(source: str, section: str, given: dict, known: dict) -> None:
    known = {**known, **dict.fromkeys(_OPTIONAL.get(section.split(".")[-1], ()))}
    extra = sorted(set(given) - set(known))
    if extra:
        raise _err(
            source,
            f"{section}.{extra[0]}",
            f"unknown key (known: {', '.join(sorted(known))})",
        )
