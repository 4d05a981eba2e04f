"""Experiments as configuration: TOML in, a typed :class:`ExperimentConfig` and its hash out.

The default experiment is ``[tool.evalkit]`` in ``pyproject.toml``; other experiments are TOML
files with the same keys at top level, passed with ``--config``. Every section is a pydantic model
below (``corpus``, ``replay``, ``model``, ``score``, ``rules``, ``continuation``, ``executor``):
each key's default is defined there and nowhere else, unknown keys are refused (``extra="forbid"``),
and values that belong together are checked together (``replay.reserve < replay.window``). A bad
file is one :class:`ConfigError` line naming the file and the key path (exit 2 at the CLI).
Stages receive their typed section, never a ``dict``.

The config hash (:func:`config_hash`) names a run folder and decides whether a run may resume. It
is taken over the values that differ from the defaults plus :data:`SCHEMA_VERSION`, so adding a
key with a default never changes an existing run's hash, and changing a value always does:

- what differs from the defaults is laid over :data:`_HASH_BASE_V1`, a frozen record of the
  defaults as they stood when this rule came in (schema version 1), and the canonical JSON of that
  is hashed. The base is a constant salt, never edited: it keeps the hashes (and so the run folders)
  of every experiment made before typed configs;
- ``[executor]``, ``[rules]`` and the spending keys of ``[model]`` are left out: where a run ran,
  how its results are judged and what it may spend never change what it computes;
- change a default's *value* and you must bump :data:`SCHEMA_VERSION` (it then enters the hash),
  or old runs would resume under the new behaviour.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

# Bump when a default changes value (see the module docstring); adding a defaulted key never needs it.
SCHEMA_VERSION = 1


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and the key."""


class Section(BaseModel):
    """A config table: unknown keys are errors, values keep their TOML types (no ``"3"`` → 3)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- sections


class CorpusConfig(Section):
    """``[corpus]``: where the sessions come from (:mod:`evalkit.corpus.build`)."""

    kind: Literal["synth", "path"] = "synth"
    sessions: int = Field(200, ge=1)  # kind = "synth"
    path: str = ""  # kind = "path": a canonical JSONL corpus
    on_error: Literal["skip", "raise"] = "skip"  # a bad record: skipped and counted, or the run stops
    session_tokens: int = Field(0, ge=0)  # synth: stop each session near this many tokens (0: no cap)


TRIGGERS = ("tokens", "messages", "recorded", "once")


class ReplayConfig(Section):
    """``[replay]``: the arms and the context-window geometry (:mod:`evalkit.replay`)."""

    arms: list[str] = ["baseline"]
    tokenizer: str = "chars4"
    window: int = Field(200_000, ge=1)
    reserve: int = Field(16_384, ge=0)
    keep_recent: int = Field(20_000, ge=0)
    summary_max_tokens: int = Field(4_096, ge=1)
    trigger: Literal["tokens", "messages", "recorded", "once"] = "tokens"
    # trigger = "once": compact exactly once, at the first turn boundary at or after this fraction of
    # the session's messages (1.0: at its end), so every arm is asked at the same point
    once_at: float = Field(1.0, gt=0.0, le=1.0)
    max_messages: int = Field(40, ge=1)
    workers: int = Field(0, ge=0)  # 0 = all cores
    keep_messages: int = Field(0, ge=0)  # trigger = "messages": kept after a compaction (0: max_messages // 2)
    summary_source_chars: int = Field(0, ge=0)  # 0: the summarizer sees the whole head
    external_timeout: float = Field(60.0, gt=0)  # seconds per compaction for external:CMD candidates
    # Summarizer request layout (docs/models.md): the same for every arm.
    request_layout: Literal["reference", "prefix"] = "reference"
    # Arms defined by settings (evalkit.replay.variants checks each table): name -> its table.
    variants: dict[str, dict[str, Any]] = {}

    @field_validator("arms")
    @classmethod
    def _arms(cls, arms: list[str]) -> list[str]:
        if not arms or not all(a.strip() for a in arms):
            raise ValueError("expected a non-empty list of arm names")
        if len(set(arms)) != len(arms):
            raise ValueError("an arm is listed twice")
        return arms

    @model_validator(mode="after")
    def _geometry(self) -> ReplayConfig:
        if self.reserve >= self.window:
            raise _KeyError("reserve", f"must be less than replay.window ({self.window})")
        if self.keep_recent >= self.window - self.reserve:
            raise _KeyError(
                "keep_recent",
                f"{self.keep_recent} ≥ the trigger threshold window - reserve = {self.window - self.reserve}",
            )
        return self


class ModelConfig(Section):
    """``[model]``: the model layer (docs/models.md). The API key is never a config key: it is read
    from the environment variable named by ``api_key_env``, so it never reaches the run folder."""

    backend: str = "extractive"  # the offline deterministic stand-in; "openai" for a real endpoint
    model: str = "extractive-v1"
    replicates: int = Field(1, ge=1)
    cache: Literal["use", "refresh", "off"] = "use"
    cache_path: str = ""  # "" = <run_dir>/model-calls.sqlite; set to share one cache across runs
    base_url: str = ""  # "" = $OPENAI_BASE_URL, else https://api.openai.com/v1
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = Field(16, ge=1)
    timeout: float = Field(60.0, ge=0)
    max_retries: int = Field(6, ge=0)
    fail_fast_after: int = Field(5, ge=0)  # consecutive refused/401/403/404 attempts before the run stops (0: never)
    backoff_base: float = Field(0.5, ge=0)
    backoff_max: float = Field(30.0, ge=0)
    replay_backend: str = "openai"  # whose cached calls the replay backend answers from
    prices: dict[str, dict[str, float]] = {}  # {"<model>": {"input": USD per 1M tokens, "output": …}}
    # Spending keys (SPENDING_KEYS, outside the hash): what a run may spend and how calls travel.
    max_calls: int | None = Field(None, ge=0)  # None: no cap
    max_cost_usd: float | None = Field(None, ge=0)
    batch: bool = False
    batch_fallback: bool = False  # send batch stragglers directly
    batch_poll_s: float = Field(10.0, gt=0)  # first wait between batch polls
    batch_max_rounds: int = Field(3, ge=1)  # submissions of one request before it is a straggler

    def with_overrides(self, over: ModelOverrides) -> ModelConfig:
        """These settings with the keys ``over`` sets replaced (``[continuation.model]``)."""
        return self.model_validate({**self.model_dump(), **over.model_dump(exclude_none=True)})


# ``[continuation.model]``: any [model] key, unset (None) where the agent uses [model]'s.
ModelOverrides = create_model(
    "ModelOverrides",
    __base__=Section,
    **{name: (f.annotation | None, None) for name, f in ModelConfig.model_fields.items()},
)


class ScoreConfig(Section):
    """``[score]``: the probe suite and question banks (:mod:`evalkit.score`)."""

    suite: str = "probes/default.toml"
    banks: list[str] = []  # glob patterns of *.probes.json banks scored with the suite
    # "calibrate": fit the judge's budget on held-out sessions first (evalkit.score.judge_budget)
    judge_budget: Literal["calibrate"] | None = None


class ContinuationConfig(Section):
    """``[continuation]``: an agent acts from each compacted context (:mod:`evalkit.continuation`)."""

    enabled: bool = True
    agent: str = "heuristic"
    max_calls: int = Field(30, ge=1)
    model: ModelOverrides = ModelOverrides()  # type: ignore[valid-type]
    max_tokens: int | None = Field(None, ge=1)
    workers: int = Field(0, ge=0)  # 0 = all cores


class ExecutorConfig(Section):
    """``[executor]``: where the shards run (:mod:`evalkit.pipeline.executors`, docs/scale.md)."""

    kind: str = "local"
    address: str = "auto"
    shards: int = Field(0, ge=0)  # 0: the executor's own default
    cpus_per_task: float = Field(1, gt=0)
    max_retries: int = Field(3, ge=0)
    work_dir: str = ""  # "" = <run_dir>/shards
    # read-only call caches every shard copies into its own first (`evalkit run --warm-cache`)
    warm_cache: list[str] = []


# --------------------------------------------------------------------------- rules tables

INTERVALS = ("bootstrap-t", "percentile", "bca")  # evalkit.decide.bootstrap.METHODS
# Intervals older runs' configs name (the clustered t, the inverted sign-flip test, an expanded
# percentile): read, and decided with the default session bootstrap-t.
LEGACY_INTERVALS = ("t", "expanded", "randomization")
Amount = float | str  # a number, or "10%" of the baseline's mean


def _amount(v: float | str) -> float | str:
    if isinstance(v, str):
        text = v.strip()
        try:
            x = float(text[:-1]) if text.endswith("%") else None
        except ValueError:
            x = None
        if x is None:
            raise ValueError("expected a number or a percentage string like '10%'")
        v_num = x
    else:
        v_num = v
    if v_num < 0:
        raise ValueError("must be ≥ 0")
    return v


class MetricRuleConfig(Section):
    """``[rules.metrics.NAME]``: which way is better, the effect worth shipping, the tolerated loss."""

    direction: Literal["higher", "lower"]
    min_effect: Amount = 0.0
    margin: Amount = 0.0
    target: Amount | None = None  # effect for power / sessions needed (default: min effect or margin)

    @field_validator("min_effect", "margin", "target")
    @classmethod
    def _amounts(cls, v: float | str | None) -> float | str | None:
        return None if v is None else _amount(v)


class CandidateRuleConfig(Section):
    """``[rules.candidates.NAME]``: the evidence a candidate claims and what it must not break."""

    success: list[str] = []
    guardrails: list[str] | None = None  # None: the rules' default guardrails


class RulesConfig(Section):
    """``[rules]`` (and a standalone rules file): how paired intervals become verdicts (docs/rules.md)."""

    alpha: float = Field(0.025, gt=0, lt=0.5)
    power: float = Field(0.8, gt=0, lt=1)
    min_sessions: int = Field(20, ge=2)
    resamples: int = Field(10_000, ge=100)
    seed: int = 20261130
    max_error_share: float = Field(0.05, ge=0, le=1)
    estimand: Literal["session_mean", "pooled"] = "session_mean"
    interval: Literal["bootstrap-t", "percentile", "bca", "t", "expanded", "randomization"] = "bootstrap-t"
    baseline: str = "baseline"
    aa: str = "aa"
    guardrails: list[str] = []
    metrics: dict[str, MetricRuleConfig] = {}
    candidates: dict[str, CandidateRuleConfig] = {}
    file: str | None = None  # an experiment's rules read from another file
    inherit: bool = True  # false: the project's rules are not extended
    # That every metric a candidate names has a [metrics.NAME] rule is checked on the rules as
    # applied (evalkit.decide.rules.parse_rules): an experiment's table may name the project's.


# --------------------------------------------------------------------------- the experiment


class ExperimentConfig(Section):
    """A whole experiment: every section with its defaults (``ExperimentConfig()`` is the built-in one)."""

    name: str = "default"
    seed: int = 20261130
    corpus: CorpusConfig = CorpusConfig()
    replay: ReplayConfig = ReplayConfig()
    model: ModelConfig = ModelConfig()
    score: ScoreConfig = ScoreConfig()
    rules: RulesConfig = RulesConfig()
    continuation: ContinuationConfig = ContinuationConfig()
    executor: ExecutorConfig = ExecutorConfig()

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not name.strip() or "/" in name:
            raise ValueError("expected a non-empty name without '/'")
        return name

    @model_validator(mode="after")
    def _judge_budget(self) -> ExperimentConfig:
        if self.score.judge_budget and "uncompacted" not in self.replay.arms:
            raise _KeyError("score.judge_budget", 'calibrating needs the ceiling arm "uncompacted" in replay.arms')
        return self

    def dump(self) -> dict[str, Any]:
        """The resolved config as written to ``config.json``: every key (unset optional ones left
        out), and the rules as the table that was applied."""
        out = self.model_dump(mode="json", exclude_none=True)
        out["rules"] = self.rules.model_dump(mode="json", exclude_unset=True)
        return out


class _KeyError(ValueError):
    """A cross-field check's failure that names its own key (relative to the model it checks)."""

    def __init__(self, key: str, why: str):
        super().__init__(why)
        self.key, self.why = key, why


# --------------------------------------------------------------------------- errors


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class that holds the last key of ``loc`` (None inside free-form tables)."""
    i = 0
    while i < len(loc) - 1:
        f = model.model_fields.get(str(loc[i]))
        if f is None:
            return None
        if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            model, i = f.annotation, i + 1
            continue
        value = _dict_value(f.annotation)
        if value is None:
            return None
        model, i = value, i + 2  # past the table's key (metrics.NAME)
    return model if i == len(loc) - 1 else None


def _dict_value(ann) -> type[BaseModel] | None:
    args = getattr(ann, "__args__", ())
    if getattr(ann, "__origin__", None) is dict and len(args) == 2:
        v = args[1]
        if isinstance(v, type) and issubclass(v, BaseModel):
            return v
    return None


def _union_tag(part: Any) -> bool:
    """Parts of a pydantic error location that name a union member or validator, not a key."""
    return isinstance(part, str) and (
        part.startswith(("function-", "lax-", "strict-", "literal[")) or "[" in part or part in _TYPE_TAGS
    )


_TYPE_TAGS = {"str", "float", "int", "bool", "none", "dict", "list"}


def first_error(e: ValidationError, model: type[BaseModel], source: str) -> str:
    """One line for the first problem pydantic found: ``source: key.path: why``."""
    err = e.errors(include_url=False)[0]
    loc = tuple(p for p in err["loc"] if not _union_tag(p))
    ctx = err.get("ctx") or {}
    exc = ctx.get("error")
    if isinstance(exc, _KeyError):
        loc = (*loc, *exc.key.split("."))
        why = exc.why
    elif err["type"] == "extra_forbidden":
        holder = _model_at(model, loc)
        names = sorted(holder.model_fields) if holder else []
        near = difflib.get_close_matches(str(loc[-1]), names, n=1)
        why = "unknown key" + (f", did you mean {near[0]}?" if near else "")
        why += f" (known: {', '.join(names)})" if names else ""
    elif err["type"] == "missing":
        why = "missing"
    elif err["type"] in ("model_type", "model_attributes_type", "dict_type"):
        why = f"{err['input']!r}: expected a table"
    else:
        msg = str(err["msg"]).removeprefix("Value error, ")
        why = f"{err['input']!r}: {msg}" if not isinstance(err["input"], dict | list) else msg
    path = ".".join(str(p) for p in loc)
    return f"{source}: {path}: {why}" if path else f"{source}: {why}"


# A key that holds a secret is refused wherever it appears: the resolved config is copied into
# the run folder (config.json), so a secret there would reach disk.
_SECRET_KEYS = {"api_key", "apikey", "api-key", "token", "password", "secret", "authorization"}
_FREE_TABLES = {("model", "prices")}  # keys there are user data (model names), not settings


def _secrets(raw: dict, source: str, path: tuple[str, ...] = ()) -> None:
    for k, v in raw.items():
        here = (*path, str(k))
        if here[-1].lower() in _SECRET_KEYS and tuple(here[:2]) not in _FREE_TABLES:
            raise ConfigError(
                f"{source}: {'.'.join(here)}: secrets are not read from the config (it is copied into "
                "the run folder); set the environment variable named by [model] api_key_env "
                "(default OPENAI_API_KEY)"
            )
        if isinstance(v, dict):
            _secrets(v, source, here)


def validate_config(raw: dict, source: str) -> ExperimentConfig:
    """A raw experiment table (as read from TOML) as an :class:`ExperimentConfig`, or one
    :class:`ConfigError` line naming ``source`` and the key path."""
    _secrets(raw, source)
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(first_error(e, ExperimentConfig, source)) from None


# --------------------------------------------------------------------------- hashing

# [model] keys that govern what a run may spend and how calls travel, never what it computes: a
# run stopped by its budget and resumed with a higher one, or sent as batch jobs, is the same run.
SPENDING_KEYS = ("max_calls", "max_cost_usd", "batch", "batch_fallback", "batch_poll_s", "batch_max_rounds")
# Sections left out of the hash: how results are judged (re-decides the same run folder) and where
# shards ran.
UNHASHED_SECTIONS = ("rules", "executor")

# The defaults of schema version 1, frozen: the salt every hash is taken over (module docstring).
# Never edit it; a new key belongs in the models only.
_HASH_BASE_V1: dict[str, Any] = {
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
        "cache_path": "",
        "base_url": "",
        "api_key_env": "OPENAI_API_KEY",
        "concurrency": 16,
        "timeout": 60.0,
        "max_retries": 6,
        "fail_fast_after": 5,
        "backoff_base": 0.5,
        "backoff_max": 30.0,
        "replay_backend": "openai",
        "prices": {},
    },
    "score": {"suite": "probes/default.toml"},
    "continuation": {"enabled": True, "agent": "heuristic", "max_calls": 30, "model": {}},
}


def differences(config: ExperimentConfig) -> dict[str, Any]:
    """What ``config`` sets to other than the defaults, minus what the hash leaves out."""
    diff = config.model_dump(mode="json", exclude_defaults=True, exclude=set(UNHASHED_SECTIONS))
    if "model" in diff:
        diff["model"] = {k: v for k, v in diff["model"].items() if k not in SPENDING_KEYS}
    return diff


def config_hash(config: ExperimentConfig | dict) -> str:
    """sha256 of what ``config`` changes from the defaults, laid over the frozen schema-1 base
    (key order and spacing do not matter; see the module docstring). A ``dict`` (an old run's
    ``config.json``) is validated first."""
    if isinstance(config, dict):
        config = validate_config(config, "config")
    blob = merge(_HASH_BASE_V1, differences(config))
    if SCHEMA_VERSION != 1:
        blob["schema"] = SCHEMA_VERSION
    text = json.dumps(blob, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Experiment:
    """A resolved experiment: the typed config, where it came from, and its hash."""

    config: ExperimentConfig = field(default_factory=ExperimentConfig)
    source: str = "(built-in defaults)"
    root: Path = field(default_factory=Path.cwd)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def hash(self) -> str:
        return config_hash(self.config)

    def resolve_path(self, p: str) -> Path:
        """Paths in a config are relative to the file that declared them."""
        path = Path(p)
        return path if path.is_absolute() else (self.root / path)


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
    """Load an experiment from a TOML file (or the default in ``pyproject.toml``) and validate it."""
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
    if overrides:
        raw = merge(raw, overrides)
    return Experiment(validate_config(raw, source), source, root)
