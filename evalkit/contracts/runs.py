"""The run folder: where each file lives (:class:`RunPaths`), one reader and one writer for its
JSON records (:func:`read_record`, :func:`write_record`; the models are in
:mod:`evalkit.contracts.records`), and the folder read back for analysis (``evalkit.load_run``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pandas as pd
from pydantic import ValidationError

from evalkit.contracts.atomic import write_json
from evalkit.contracts.records import (
    UNVERSIONED,
    Calibration,
    CallStats,
    ContinuationManifest,
    CorpusManifest,
    Decision,
    Health,
    Incomplete,
    JudgeBudget,
    ModelUsage,
    Plan,
    Record,
    RunConfig,
    ShardMarker,
    Timings,
    Warnings,
)


class RunFolderError(ValueError):
    """A folder that is not a run folder, or a run-folder file that cannot be read as what it
    should hold; the message names the folder or file (the CLI: one line, exit 2)."""


class RecordVersionError(RunFolderError):
    """A run-folder record of a schema version this evalkit does not read (the message names the
    file, its version and the versions read)."""


def read_json_file(path: str | os.PathLike, what: str = "JSON object", shape: type = dict) -> Any:
    """The JSON value of ``path`` when it has ``shape``; :class:`RunFolderError` naming the file
    for unreadable bytes, invalid JSON or the wrong shape (a list where an object belongs)."""
    p = Path(path)
    try:
        value = json.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RunFolderError(f"{p}: not UTF-8 at byte {e.start}; expected a {what}") from None
    except ValueError as e:
        raise RunFolderError(f"{p}: not valid JSON ({e}); expected a {what}") from None
    except RecursionError:
        raise RunFolderError(f"{p}: JSON nested too deeply; expected a {what}") from None
    if not isinstance(value, shape):
        raise RunFolderError(f"{p}: holds a JSON {type(value).__name__}, expected a {what}")
    return value


@dataclass(frozen=True)
class RunPaths:
    """Where everything lives inside a run folder: the one place its file names are spelled."""

    root: Path

    # File names callers need without a folder (the marks of a run folder).
    CONFIG: ClassVar[str] = RunConfig.FILE
    METRICS: ClassVar[str] = "metrics.parquet"
    SHARD: ClassVar[str] = ShardMarker.FILE

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    def record(self, cls: type[Record]) -> Path:
        """Where record ``cls`` lives (``cls.FILE`` under the root)."""
        return self.root / cls.FILE

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    @property
    def sessions(self) -> Path:
        return self.corpus / "sessions.jsonl"

    @property
    def facts(self) -> Path:
        return self.corpus / "facts.jsonl"

    @property
    def manifest(self) -> Path:
        return self.record(CorpusManifest)

    @property
    def events(self) -> Path:
        return self.root / "events"

    @property
    def metrics(self) -> Path:
        return self.root / self.METRICS

    @property
    def continuation(self) -> Path:
        return self.root / "continuation"

    @property
    def continuation_metrics(self) -> Path:
        return self.continuation / self.METRICS

    @property
    def continuation_manifest(self) -> Path:
        return self.record(ContinuationManifest)

    @property
    def decision(self) -> Path:
        return self.record(Decision)

    @property
    def health(self) -> Path:
        return self.record(Health)

    @property
    def timings(self) -> Path:
        return self.record(Timings)

    @property
    def usage(self) -> Path:
        return self.record(ModelUsage)

    @property
    def call_stats(self) -> Path:
        return self.record(CallStats)

    @property
    def call_cache(self) -> Path:
        return self.root / "model-calls.sqlite"

    @property
    def plan(self) -> Path:
        return self.record(Plan)

    @property
    def warnings(self) -> Path:
        return self.record(Warnings)

    @property
    def calibration(self) -> Path:
        return self.record(Calibration)

    @property
    def report(self) -> Path:
        return self.root / "report" / "report.md"

    @property
    def config(self) -> Path:
        return self.record(RunConfig)


R = TypeVar("R", bound=Record)


def _field(loc: tuple) -> str:
    return ".".join(str(x) for x in loc) or "(top level)"


def parse_record(cls: type[R], body: Any, path: str | os.PathLike) -> R:
    """``body`` (read from ``path``) as record ``cls``: its version checked (the module docstring
    of :mod:`evalkit.contracts.records`), its fields validated. :class:`RunFolderError` in one
    line naming the file and the version or field otherwise."""
    if not isinstance(body, dict):
        raise RunFolderError(f"{path}: holds a JSON {type(body).__name__}, expected a {cls.WHAT}")
    version = body.get("schema_version", UNVERSIONED)
    if not isinstance(version, int) or isinstance(version, bool):
        raise RunFolderError(f"{path}: field 'schema_version': {version!r} is not a whole number")
    if version > cls.VERSION:
        raise RecordVersionError(
            f"{path}: written by a newer evalkit (schema {version}); this evalkit reads schema "
            f"{cls.OLDEST} to {cls.VERSION}: upgrade evalkit"
        )
    if version < cls.OLDEST:
        how = " (no schema_version)" if "schema_version" not in body else ""
        raise RecordVersionError(
            f"{path}: written by evalkit schema {version}{how}; this evalkit reads schema "
            f"{cls.OLDEST} to {cls.VERSION}; rerun `{cls.REWRITE}`"
        )
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        raise RunFolderError(f"{path}: field '{_field(first['loc'])}': {first['msg']}") from None


def load_record(path: str | os.PathLike, cls: type[R]) -> R:
    """Record ``cls`` from the file ``path`` (a record outside a run folder: a corpus folder's
    manifest); :class:`RunFolderError` naming the file when it cannot be read as one."""
    return parse_record(cls, read_json_file(path, cls.WHAT), path)


def read_record(run: str | os.PathLike, cls: type[R], *, required: bool = False) -> R | None:
    """Record ``cls`` of the run folder ``run``; None when the file is absent (or
    :class:`RunFolderError` when ``required``)."""
    path = RunPaths(run).record(cls)
    if not path.is_file():
        if required:
            raise RunFolderError(f"{path}: missing ({cls.WHAT}); `{cls.REWRITE}` writes it")
        return None
    return load_record(path, cls)


def save_record(path: str | os.PathLike, cls: type[R], body: R | dict[str, Any]) -> R:
    """Write record ``cls`` (a model or its JSON object) to ``path``, atomically, stamped with this
    evalkit's ``schema_version``; returns the record written.

    Only the fields the writer set are written (the defaults are the reader's business), so a
    record read and written again keeps its content apart from the version."""
    record = body if isinstance(body, cls) else cls.model_validate(body)
    record.schema_version = cls.VERSION
    try:
        write_json(path, record.model_dump(mode="json", exclude_unset=True))
    except OSError as e:  # "No space left on device" names no file
        if e.filename:
            raise
        raise OSError(e.errno, f"{path}: {e.strerror or e}") from None
    return record


def write_record(run: str | os.PathLike, cls: type[R], body: R | dict[str, Any]) -> R:
    """Write record ``cls`` into the run folder ``run`` (:func:`save_record` at ``cls.FILE``)."""
    return save_record(RunPaths(run).record(cls), cls, body)


def run_config(run: str | os.PathLike) -> RunConfig:
    """``config.json`` of a run folder, checked (:class:`RunFolderError` naming it otherwise)."""
    rec = read_record(run, RunConfig, required=True)
    assert rec is not None
    return rec


def read_usage(run: str | os.PathLike) -> ModelUsage | CallStats | None:
    """The run's model usage: ``model-usage.json`` (counted by the client); for folders written
    before the client counted, the call cache's ``model-calls.json``; None when neither exists."""
    return read_record(run, ModelUsage) or read_record(run, CallStats)


def run_folder(path: str | os.PathLike | None, marks: tuple[str, ...] = (RunPaths.CONFIG,)) -> Path:
    """``path`` as a run folder, or :class:`RunFolderError` naming it: missing, empty name, not a
    folder, or a folder no run wrote (empty, foreign: none of the ``marks`` files; a
    ``config.json`` that is there must be readable).

    Verbs that read a run check this first, before they create anything (an output folder). The
    gate judges a bare metrics table too: its marks include ``metrics.parquet``."""
    if path is None or not str(path).strip():
        raise RunFolderError(f"run folder {str(path or '')!r}: empty path")
    p = Path(path)
    if not p.exists():
        raise RunFolderError(f"{p}: no such run folder")
    if not p.is_dir():
        raise RunFolderError(f"{p}: not a folder (a run folder is expected)")
    if not any((p / m).is_file() for m in marks):
        kind = "an empty folder" if not any(p.iterdir()) else "a folder no evalkit run wrote"
        raise RunFolderError(f"{p}: not a run folder ({kind}: no {' or '.join(marks)})")
    if RunPaths(p).config.is_file():
        run_config(p)
    return p


class Run:
    """A run folder read back: its records (typed, read on first use, None when absent) and its
    tables as DataFrames (read on first use). A record that is there but unreadable, of the wrong
    shape or of a version this evalkit does not read raises :class:`RunFolderError` naming it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.paths = RunPaths(self.path)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    def record(self, cls: type[R]) -> R | None:
        """Record ``cls`` of this run (cached), None when the file is absent."""
        cache = self.__dict__.setdefault("_records", {})
        if cls not in cache:
            cache[cls] = read_record(self.path, cls)
        return cache[cls]

    @property
    def run_config(self) -> RunConfig | None:
        return self.record(RunConfig)

    @property
    def config(self) -> dict[str, Any]:
        """The experiment config the run was made with (empty when ``config.json`` is absent)."""
        rc = self.run_config
        return rc.config if rc else {}

    @property
    def manifest(self) -> CorpusManifest | None:
        return self.record(CorpusManifest)

    @property
    def decision(self) -> Decision | None:
        return self.record(Decision)

    @property
    def health(self) -> Health | None:
        return self.record(Health)

    @property
    def timings(self) -> Timings | None:
        return self.record(Timings)

    @property
    def usage(self) -> ModelUsage | CallStats | None:
        if "_usage" not in self.__dict__:
            self.__dict__["_usage"] = self.record(ModelUsage) or self.record(CallStats)
        return self.__dict__["_usage"]

    @property
    def plan(self) -> Plan | None:
        return self.record(Plan)

    @property
    def incomplete(self) -> Incomplete | None:
        return self.record(Incomplete)

    @property
    def judge_budget(self) -> JudgeBudget | None:
        return self.record(JudgeBudget)

    @property
    def shard(self) -> ShardMarker | None:
        return self.record(ShardMarker)

    @property
    def warnings(self) -> Warnings | None:
        return self.record(Warnings)

    @property
    def calibration(self) -> Calibration | None:
        return self.record(Calibration)

    @property
    def continuation_manifest(self) -> ContinuationManifest | None:
        return self.record(ContinuationManifest)

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """The metrics table (``metrics.parquet``), checked against its contract (ValueError naming
        the file otherwise); an empty table when the run has none."""
        from evalkit.contracts.metrics import COLUMNS, load_metrics

        p = self.paths.metrics
        return load_metrics(p) if p.is_file() else pd.DataFrame(columns=COLUMNS)

    @cached_property
    def questions(self) -> pd.DataFrame:
        """The exams' per-question grades (``questions.parquet``; a run written before that table
        existed: from its metric rows)."""
        from evalkit.contracts import questions

        return questions.read(self.path)

    @cached_property
    def aggregate(self) -> pd.DataFrame:
        """Per (arm, metric, session): rows, errors, n, sum, sum of squares (``aggregate.parquet``,
        rebuilt from the metrics table when stale or missing)."""
        from evalkit.contracts import aggregate

        return aggregate.frame(aggregate.load(self.path))

    @property
    def summary(self) -> list[dict[str, Any]]:
        """Per (arm, metric): sessions, mean of session means, values, errors (from the aggregate; a
        run decided before it existed: its ``decision.json`` summary)."""
        from evalkit.contracts import aggregate

        if self.paths.metrics.is_file():
            return aggregate.summary(aggregate.load(self.path))
        return list(self.decision.summary) if self.decision else []

    @cached_property
    def continuation_metrics(self) -> pd.DataFrame | None:
        """The continuation stage's own rows (``continuation/metrics.parquet``), None without one."""
        from evalkit.contracts.metrics import load_metrics

        p = self.paths.continuation_metrics
        return load_metrics(p) if p.is_file() else None

    def events(self, arm: str | None = None) -> pd.DataFrame:
        """Events as a DataFrame (one row per compaction; context entries left out)."""
        from evalkit.contracts.event import read_events

        rows = []
        for p in sorted(self.paths.events.glob("*.jsonl")):
            if arm and p.stem != arm:
                continue
            for e in read_events(p):
                d = {k: v for k, v in e.__dict__.items() if k not in ("new_context", "request", "invariants")}
                d.update({f"inv_{k}": v for k, v in e.invariants.__dict__.items()})
                d["summary_chars"] = len(e.summary)
                rows.append(d)
        return pd.DataFrame(rows)


def load_run(path: str | os.PathLike, marks: tuple[str, ...] = (RunPaths.CONFIG,)) -> Run:
    """Open a run folder written by ``evalkit run`` (or ``merge``): checked to be one (see
    :func:`run_folder`), its records and tables read on first use."""
    return Run(run_folder(path, marks))


WARNINGS_FILE = Warnings.FILE


def read_warnings(run_dir: str | os.PathLike) -> Warnings | None:
    """``warnings.json`` of a run (written by :mod:`evalkit.pipeline.warnings`), None when the run
    has none (written before warnings existed)."""
    # An unreadable file is an error naming it, never "no warnings" (that would print "endpoint:
    # none, offline" for a run that sent its sessions somewhere).
    return read_record(run_dir, Warnings)
