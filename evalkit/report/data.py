"""Everything a report reads from a run folder, loaded defensively.

Runs written by older versions (or stages that have not run yet) lack files and keys; a report
must still render and say what is missing, so every reader here returns an empty value and
records a note instead of raising.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalkit.contracts.event import events_path
from evalkit.contracts.metrics_sessions import SESSION_COLUMNS, session_table
from evalkit.contracts.records import (
    CallStats,
    CorpusManifest,
    Decision,
    Health,
    ModelUsage,
    RunConfig,
    Timings,
    Verdict,
)
from evalkit.contracts.runs import (
    R,
    RecordVersionError,
    RunFolderError,
    RunPaths,
    load_record,
    read_record,
    read_usage,
)
from evalkit.report.drawing import FigureDrawer
from evalkit.report.markdown import code

# The per-event fields the report uses.
EVENT_FIELDS = [
    "arm",
    "session",
    "event",
    "round",
    "tokens_before",
    "tokens_after",
    "window",
    "replicate",
    "summary_tokens",  # the summary's size under the run's tokenizer (compounding: its share of the window)
    "request_key",  # the summarizer call in the run's call cache (cadence: seconds and dollars)
]

# The question table's columns the sections and the viewer read: not ``about`` (a text per
# question), nor the run, kind, round and replicate, which none reads (the Inspect export reads
# the table itself).
QUESTION_COLUMNS = ["exam", "question", "arm", "session", "event", "grade", "error"]

# Metrics a section summarizes by a median of events, not a mean: kept event by event.
EVENT_METRICS = ("turns_between",)


@dataclass
class ReportData:
    """A run folder's contents as the report needs them; ``missing`` lists what was absent."""

    run_dir: Path
    # The run folder's records (evalkit.contracts.records); an absent one is an empty record
    # (its fields' defaults), named in ``missing``.
    run_config: RunConfig
    manifest: CorpusManifest
    decision: Decision
    timings: Timings
    model_stats: ModelUsage | CallStats | None
    events: pd.DataFrame  # EVENT_FIELDS + summary_chars, summary_failed, over_limit, line
    # One row per (arm, metric, session) (evalkit.contracts.metrics_sessions): value is the session mean.
    metrics: pd.DataFrame
    missing: list[str] = field(default_factory=list)
    # Event-level values of the metrics a section takes a median of (EVENT_METRICS).
    event_values: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The exams' per-question grades (evalkit.contracts.questions): questions.parquet, its text
    # columns categoricals (questions.read's ``encoded``).
    questions: pd.DataFrame = field(default_factory=pd.DataFrame)
    # health.json (evalkit.decide.health): None when absent or unreadable (its section says so).
    health: Health | None = None
    # Draws the sections' figures; the report makes it draw them in the background.
    figures: FigureDrawer = field(default_factory=FigureDrawer)

    @property
    def config(self) -> dict[str, Any]:
        return self.run_config.config

    @property
    def name(self) -> str:
        return str(self.config.get("name") or self.run_dir.name)

    @property
    def arms(self) -> list[str]:
        arms = list(self.config.get("replay", {}).get("arms", []))
        for a in self.events["arm"].unique() if len(self.events) else []:
            if a not in arms:
                arms.append(a)
        return arms

    @property
    def summary(self) -> list[dict[str, Any]]:
        """Per (arm, metric): sessions, mean of session means, values and errors (from the run's
        aggregate; ``decision.json`` of a run decided before it moved there has its own)."""
        if len(self.metrics):
            from evalkit.contracts.aggregate import summary_of

            return summary_of(self.metrics)
        return list(self.decision.summary or [])

    @property
    def verdicts(self) -> dict[str, Verdict]:
        return self.decision.verdicts

    @property
    def decided(self) -> bool:
        """Whether the run has a ``decision.json``."""
        return self.paths.decision.is_file()

    @property
    def paths(self) -> RunPaths:
        return RunPaths(self.run_dir)

    @property
    def baseline(self) -> str:
        return "baseline" if "baseline" in self.arms or not self.arms else self.arms[0]


def _record(run: Path, cls: type[R], missing: list[str] | None, what: str, empty: R) -> R:
    """Record ``cls`` of the run; absent or unreadable: ``empty`` and a note in ``missing`` (when
    given). A version this evalkit does not read is an error naming the file (never a report
    without it)."""
    path = RunPaths(run).record(cls)
    if not path.exists():
        if missing is not None:
            missing.append(f"`{cls.FILE}` ({what})")
        return empty
    try:
        return load_record(path, cls)
    except RecordVersionError:
        raise
    except RunFolderError as e:
        if missing is None:
            return empty
        missing.append(f"`{cls.FILE}` is unreadable ({str(e).removeprefix(f'{path}: ')})")
        return empty


def _event_row(raw: bytes) -> dict[str, Any]:
    d = json.loads(raw)
    row = {k: d.get(k) for k in EVENT_FIELDS}
    row["summary_chars"] = len(d.get("summary") or "")
    row["summary_failed"] = d.get("summary_error") is not None
    row["over_limit"] = bool((d.get("invariants") or {}).get("over_limit", False))
    return row


def read_event_table(events_dir: Path, arms: list[str] | None = None) -> pd.DataFrame:
    """One row per event with the fields a report plots; ``line`` is the 1-based line in the file."""
    cols = [*EVENT_FIELDS, "summary_chars", "summary_failed", "over_limit", "line"]
    # Column lists, not a dict per row: at 800 sessions the dicts were most of the reading's peak.
    table: dict[str, list[Any]] = {c: [] for c in cols}
    for p in sorted(events_dir.glob("*.jsonl")) if events_dir.is_dir() else []:
        if arms and p.stem not in arms:
            continue
        with open(p, "rb") as fh:
            for n, raw in enumerate(fh, 1):
                if raw.strip():
                    try:
                        row = _event_row(raw)
                    except (ValueError, AttributeError) as e:
                        raise ValueError(f"{p}:{n}: not an event record: {e}") from None
                    row["arm"] = row["arm"] or p.stem
                    row["line"] = n
                    for c in cols:
                        table[c].append(row[c])
    if not table["line"]:
        return pd.DataFrame(columns=cols)  # object columns, as a frame of rows would have
    return pd.DataFrame(table, columns=cols)


def read_event(run_dir: Path, arm: str, line: int) -> dict[str, Any]:
    """The full event at ``line`` (1-based) of ``events/<arm>.jsonl``."""
    with open(events_path(run_dir, arm), "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if n == line:
                return json.loads(raw)
    raise KeyError(f"{arm}.jsonl has no line {line}")


def load_report_data(run_dir: str | os.PathLike) -> ReportData:
    """Read a run folder for reporting; absent or unreadable parts are empty and listed in ``missing``."""
    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: no such run folder")
    missing: list[str] = []
    paths = RunPaths(run)
    run_config = _record(run, RunConfig, missing, "config, hash and reproduce command", RunConfig(config={}))
    manifest = _record(run, CorpusManifest, missing, "corpus statistics", CorpusManifest())
    # Absent: a run not decided yet (a caveat). Present but unreadable or of the wrong shape: a
    # data error naming the file, not a report without its verdicts.
    decision = read_record(run, Decision)
    if decision is None:
        missing.append(f"`{Decision.FILE}` (estimates and verdicts)")
        decision = Decision()
    timings = _record(run, Timings, missing, "wall time per stage", Timings())
    model_stats = read_usage(run)
    if not paths.events.is_dir():
        missing.append("`events/` (compaction events)")
    else:
        # One arm's file gone: its counts and evidence would drop out of the report unremarked.
        for arm in run_config.config.get("replay", {}).get("arms", []):
            if not events_path(run, arm).is_file():
                missing.append(
                    f"{code('events/' + events_path(run, arm).name)} (the {code(arm)} arm's compaction "
                    "events: its event counts and evidence are left out)"
                )
    events = read_event_table(paths.events)
    metrics = pd.DataFrame(columns=SESSION_COLUMNS)
    event_values = pd.DataFrame(columns=["arm", "session", "metric", "value"])
    if paths.metrics.exists():
        try:
            metrics, event_values = session_table(paths.metrics, EVENT_METRICS)
        except (OSError, ValueError) as e:
            missing.append(f"`{paths.metrics.name}` is unreadable ({type(e).__name__}: {e})")
    else:
        missing.append(f"`{paths.metrics.name}` (the metrics table)")
    from evalkit.contracts import questions

    try:
        # The text columns as categoricals: a question id, session and arm held once, not per row.
        asked = questions.read(run, columns=QUESTION_COLUMNS, encoded=True)
    except (OSError, ValueError) as e:
        asked = questions.empty_frame()
        missing.append(f"`{questions.QUESTIONS_FILE}` is unreadable ({type(e).__name__}: {e})")
    health = _record(run, Health, None, "metric health", None)
    return ReportData(
        run,
        run_config,
        manifest,
        decision,
        timings,
        model_stats,
        events,
        metrics,
        missing,
        event_values,
        asked,
        health,
    )
