"""The JSON records of a run folder, one versioned model each: the source of truth for their fields.

Each record names its file (``FILE``, relative to the run folder), the schema version this evalkit
writes (``VERSION``), the oldest it reads (``OLDEST``) and the command that writes it again
(``REWRITE``, for the error an old folder gets). A record is read and written only through
:func:`evalkit.contracts.runs.read_record` / :func:`~evalkit.contracts.runs.write_record`.

Versioning rule: every record written carries ``schema_version``. A file without one was written
before records were versioned (evalkit up to 1656aa3 and the releases after it): schema 1. A
reader takes every version from ``OLDEST`` to ``VERSION``; anything else is refused in one line
naming the file and both versions. Adding an optional field does not bump the version; renaming,
removing or changing the meaning of a field does, and a reader that cannot read the older shape
raises ``OLDEST`` to the new version.

Records allow fields they do not model (``extra="allow"``): a field another stage adds is kept
through a read and a write, and a newer evalkit's optional field does not break an older reader.
The content of ``config.json``'s ``config`` is the experiment config's own model
(:mod:`evalkit.contracts.config`); it is carried here as an object.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

# What this evalkit writes (every record moves together: one number to quote in an error).
SCHEMA_VERSION = 2
# A file without ``schema_version``.
UNVERSIONED = 1


class Record(BaseModel):
    """A run-folder JSON record (see the module docstring for the versioning rule)."""

    model_config = ConfigDict(extra="allow")

    FILE: ClassVar[str]
    WHAT: ClassVar[str]
    VERSION: ClassVar[int] = SCHEMA_VERSION
    OLDEST: ClassVar[int] = UNVERSIONED
    REWRITE: ClassVar[str] = "evalkit run --resume"

    schema_version: int = UNVERSIONED


class _Open(BaseModel):
    """A nested object of a record: its modelled fields typed, the rest kept.

    Read by attribute only: a by-key read (``v.get("reason")``) of a field that was renamed or
    never modelled would quietly give None where an attribute read fails loudly. Whether a field
    was in the file at all (an older decide stage did not write it) is ``model_fields_set``."""

    model_config = ConfigDict(extra="allow")


# --------------------------------------------------------------------------- config.json


class RunConfig(Record):
    """``config.json``: the resolved config (secrets redacted), its hash, and how to reproduce it."""

    FILE = "config.json"
    WHAT = "run config (an object with a 'config' object)"

    config: dict[str, Any]  # the experiment config (owner: evalkit.contracts.config)
    config_hash: str | None = None
    source: str | None = None
    command: str | None = None
    endpoints: list[dict[str, Any]] = Field(default_factory=list)
    python: str | None = None
    platform: str | None = None


# --------------------------------------------------------------------------- corpus/manifest.json


class CorpusManifest(Record):
    """``corpus/manifest.json``: what the corpus stage built (kind, seed, sessions, statistics)."""

    NAME: ClassVar[str] = "manifest.json"  # in a corpus folder (a run's corpus/ or an import's)
    FILE = "corpus/" + NAME
    WHAT = "corpus manifest (an object)"
    REWRITE = "evalkit run"

    kind: str | None = None
    seed: int | None = None
    source: Any = None
    sessions: list[Any] = Field(default_factory=list)
    skipped: Any = None
    stats: dict[str, Any] = Field(default_factory=dict)


class ContinuationManifest(Record):
    """``continuation/manifest.json``: what the continuation stage ran (owner: continuation)."""

    FILE = "continuation/manifest.json"
    WHAT = "continuation manifest (an object)"


# --------------------------------------------------------------------------- decision.json


class MetricEstimate(_Open):
    """One candidate's result on one metric (fields: docs/contracts.md, owner: decide)."""

    role: str | None = None
    direction: str | None = None
    estimate: float | None = None
    ci: list[float | None] | None = None
    p_value: float | None = None
    p_worse: float | None = None
    p_holm: float | None = None
    threshold: float | None = None
    mde: float | None = None
    power: float | None = None
    n_sessions: int | None = None
    unmatched: int | None = None  # (session, event) keys scored under one arm only
    lost_sessions: int | None = None
    errors: int | None = None
    rows: int | None = None
    baseline_mean: float | None = None
    candidate_mean: float | None = None


class Verdict(_Open):
    """One candidate's verdict and what decided it."""

    verdict: str
    reason: str = ""
    deciding_metric: str | None = None
    deciding_p: float | None = None
    deciding_test: str | None = None
    n_sessions: int | None = None
    lost_sessions: int | None = None
    health_notes: list[str] = Field(default_factory=list)
    metrics: dict[str, MetricEstimate] = Field(default_factory=dict)


class Decision(Record):
    """``decision.json``: per-(arm, metric) summary, statistics settings, noise floor, verdicts.

    Per-session arrays an older decide stage left in a verdict's metrics are kept as extra fields
    and not read."""

    FILE = "decision.json"
    WHAT = "decision (an object)"
    REWRITE = "evalkit decide"

    summary: list[dict[str, Any]] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)
    noise_floor: dict[str, Any] = Field(default_factory=dict)
    noise_note: str = ""
    verdicts: dict[str, Verdict] = Field(default_factory=dict)


class Health(Record):
    """``health.json``: metric health and the notes joined onto verdicts (owner: decide.health)."""

    FILE = "health.json"
    WHAT = "metric health (an object)"
    REWRITE = "evalkit decide"

    metrics: dict[str, Any] = Field(default_factory=dict)
    unhealthy: list[Any] = Field(default_factory=list)
    unusable_exams: list[Any] = Field(default_factory=list)
    verdict_notes: dict[str, list[str]] = Field(default_factory=dict)
    exams: dict[str, Any] = Field(default_factory=dict)
    identical_to_baseline: dict[str, Any] = Field(default_factory=dict)
    shares_code: dict[str, Any] = Field(default_factory=dict)


# --------------------------------------------------------------------------- run bookkeeping


class Timings(Record):
    """``timings.json``: wall seconds per stage, and ``total_before_report``."""

    FILE = "timings.json"
    WHAT = "stage timings (an object of seconds)"

    __pydantic_extra__: dict[str, float] = Field(init=False)

    def stages(self) -> dict[str, float]:
        """Stage name → seconds, in the order written."""
        return dict(self.model_extra or {})


class ModelUsage(Record):
    """``model-usage.json``: what the model client sent, retried, failed and found in the cache
    (owner: evalkit.models.usage). Older folders: :data:`USAGE_FALLBACKS`."""

    FILE = "model-usage.json"
    WHAT = "model usage (an object)"

    source: str | None = None
    total: dict[str, Any] = Field(default_factory=dict)


class CallStats(Record):
    """``model-calls.json``: calls, tokens and cost counted from the run's call cache."""

    FILE = "model-calls.json"
    WHAT = "model-call statistics (an object)"

    calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    by_backend_model: list[dict[str, Any]] = Field(default_factory=list)
    cache_file: str | None = None


class Plan(Record):
    """``plan.json``: the calls and dollars planned before a run with a real model (owner: plan)."""

    FILE = "plan.json"
    WHAT = "run plan (an object)"
    REWRITE = "evalkit plan"

    totals: dict[str, Any] = Field(default_factory=dict)
    created_at: float | None = None
    invocation: str = ""


class Incomplete(Record):
    """``incomplete.json``: why a run stopped short (a spending limit) and how far it got."""

    FILE = "incomplete.json"
    WHAT = "incomplete-run record (an object)"

    reason: str = ""
    detail: str = ""


class JudgeBudget(Record):
    """``judge-budget.json``: the offline judge's calibrated ``max_chars`` (owner: score.judge_budget)."""

    FILE = "judge-budget.json"
    WHAT = "judge budget (an object)"
    REWRITE = "evalkit judge-budget"

    budget: int
    grid: list[int] = Field(default_factory=list)
    tolerance: float | None = None
    arm: str | None = None
    metric: str | None = None
    sweep: dict[str, dict[str, Any]] = Field(default_factory=dict)  # budget (as text) → mean, half, n
    calibration: list[str] = Field(default_factory=list)
    reported: list[str] = Field(default_factory=list)


class ShardMarker(Record):
    """``shard.json``: a shard's completion marker, written last (owner: pipeline.shard)."""

    FILE = "shard.json"
    WHAT = "shard marker (an object)"

    shard: int
    shards: int
    config_hash: str
    root: str = ""
    sessions: list[str] = Field(default_factory=list)


class Warnings(Record):
    """``warnings.json``: the run's warnings and the endpoints it sent to (owner: pipeline.warnings)."""

    FILE = "warnings.json"
    WHAT = "run warnings (an object)"

    warnings: list[Any] = Field(default_factory=list)
    endpoints: list[Any] = Field(default_factory=list)


class Calibration(Record):
    """``calibration.json``: false-pass / false-drop rates and power by simulation (owner: decide.calibrate)."""

    FILE = "calibration.json"
    WHAT = "calibration (an object)"
    REWRITE = "evalkit calibrate"

    run: str | None = None
    rows: list[dict[str, Any]] = Field(default_factory=list)
    # The rules it was computed for (decide.calibrate.rules_hash): a re-decide under others drops it.
    rules_hash: str | None = None


RECORDS: tuple[type[Record], ...] = (
    RunConfig,
    CorpusManifest,
    ContinuationManifest,
    Decision,
    Health,
    Timings,
    ModelUsage,
    CallStats,
    Plan,
    Incomplete,
    JudgeBudget,
    ShardMarker,
    Warnings,
    Calibration,
)
