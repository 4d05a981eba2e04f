"""Experiments as configuration: TOML in, a resolved dict and its hash out.

The default experiment is ``[tool.evalkit]`` in ``pyproject.toml``; other experiments are TOML
files with the same keys at top level, passed with ``--config``. Each stage reads its own
section (``corpus``, ``replay``, ``model``, ``score``, ``rules``, ``report``) and validates it;
this module only merges defaults, resolves, and hashes, so stages stay independent.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.contracts.config_check import ConfigError, check_config

# Defaults for every key a stage reads; a config file only states what differs.
DEFAULTS: dict[str, Any] = {
    "name": "default",
    "seed": 20261130,
    "corpus": {"kind": "synth", "sessions": 200, "path": "", "on_error": "skip"},
    "replay": {
        "arms": ["baseline"],
        "tokenizer": "chars4",
        "window": 200_000,
        "reserve": 16_384,
        "keep_recent": 20_000,
        "summary_max_tokens": 4_096,
        "trigger": "tokens",
        "max_messages": 40,
        "workers": 0,
        "keep_messages": 0,
        "summary_source_chars": 0,
        "external_timeout": 60.0,
    },
    "model": {
        "backend": "extractive",
        "model": "extractive-v1",
        "replicates": 1,
        "cache": "use",
        # Model layer (docs/models.md). The API key is never a config key: it is read from the
        # environment variable named by api_key_env, so it never reaches the run folder.
        "cache_path": "",  # "" = <run_dir>/model-calls.sqlite; set to share one cache across runs
        "base_url": "",  # "" = $OPENAI_BASE_URL, else https://api.openai.com/v1
        "api_key_env": "OPENAI_API_KEY",
        "concurrency": 16,
        "timeout": 60.0,
        "max_retries": 6,
        "fail_fast_after": 5,  # consecutive refused/401/403/404 attempts before the run stops (0: never)
        "backoff_base": 0.5,
        "backoff_max": 30.0,
        "replay_backend": "openai",  # whose cached calls the replay backend answers from
        "prices": {},  # {"<model>": {"input": USD per 1M tokens, "output": USD per 1M tokens}}
    },
    "score": {"suite": "probes/default.toml"},
    "rules": {},
    # Continuation runs (evalkit.continuation): an agent acts from each compacted context.
    "continuation": {"enabled": True, "agent": "heuristic", "max_calls": 30, "model": {}},
    # Where the shards run (evalkit.pipeline.executors, docs/scale.md); not part of the config hash.
    "executor": {},
}


@dataclass(frozen=True)
class Experiment:
    """A resolved experiment: the merged config, where it came from, and its hash."""

    config: dict[str, Any]
    source: str
    root: Path = field(default_factory=Path.cwd)

    @property
    def name(self) -> str:
        return str(self.config["name"])

    @property
    def seed(self) -> int:
        return int(self.config["seed"])

    @property
    def hash(self) -> str:
        return config_hash(self.config)

    def section(self, name: str) -> dict[str, Any]:
        """One stage's settings (a copy; stages must not write into the experiment)."""
        return copy.deepcopy(self.config.get(name, {}))

    def resolve_path(self, p: str) -> Path:
        """Paths in a config are relative to the file that declared them."""
        path = Path(p)
        return path if path.is_absolute() else (self.root / path)


# [model] keys that govern what a run may spend and how calls travel, never what it computes: a
# run stopped by its budget and resumed with a higher one, or sent as batch jobs, is the same run.
SPENDING_KEYS = ("max_calls", "max_cost_usd", "batch", "batch_fallback", "batch_poll_s", "batch_max_rounds")


def config_hash(config: dict) -> str:
    """sha256 of the canonical JSON of a resolved config (key order and spacing do not matter;
    ``SPENDING_KEYS`` of ``[model]`` and ``[executor]`` left out: where a run ran never changes it)."""
    config = {k: v for k, v in config.items() if k != "executor"}
    model = config.get("model")
    if isinstance(model, dict) and any(k in model for k in SPENDING_KEYS):
        config = {**config, "model": {k: v for k, v in model.items() if k not in SPENDING_KEYS}}
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def merge(base: dict, over: dict) -> dict:
    """Deep merge: tables merge key by key, everything else is replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def read_toml(path: str | os.PathLike, what: str, error: type[Exception] | None = None) -> dict:
    """A TOML file's table; a missing file or bad TOML raises ``error`` naming the file."""
    error = error or ConfigError
    p = Path(path)
    if not p.is_file():
        raise error(f"{p}: no such {what} file")
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise error(f"{p}: invalid TOML: {e}") from None


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.evalkit]`` table, walking up from ``start``."""
    d = (start or Path.cwd()).resolve()
    for cand in (d, *d.parents):
        p = cand / "pyproject.toml"
        if p.is_file():
            try:
                if "evalkit" in tomllib.loads(p.read_text(encoding="utf-8")).get("tool", {}):
                    return p
            except tomllib.TOMLDecodeError:
                continue
    return None


def load_experiment(path: str | os.PathLike | None = None, overrides: dict | None = None) -> Experiment:
    """Load an experiment from a TOML file (or the default in ``pyproject.toml``) and resolve it."""
    if path is None:
        pp = find_pyproject()
        if pp is None:
            raw, source, root = {}, "(built-in defaults)", Path.cwd()
        else:
            raw = tomllib.loads(pp.read_text(encoding="utf-8"))["tool"]["evalkit"]
            source, root = f"{pp}[tool.evalkit]", pp.parent
    else:
        p = Path(path)
        raw = read_toml(p, "config")
        # A file may hold a whole pyproject; take its tool.evalkit table then.
        raw = raw.get("tool", {}).get("evalkit", raw)
        source, root = str(p), p.parent.resolve()
    unknown = set(raw) - set(DEFAULTS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(DEFAULTS))})"
        )
    cfg = merge(DEFAULTS, raw)
    if overrides:
        cfg = merge(cfg, overrides)
    check_config(raw, cfg, source, DEFAULTS)
    return Experiment(cfg, source, root)
