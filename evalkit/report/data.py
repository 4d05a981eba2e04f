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

# Metrics a section summarizes by a median of events, not a mean: kept event by event.
EVENT_METRICS = ("turns_between",)

# Files the model layer may leave with call/cache counts; the first one found is used.
MODEL_STATS_FILES = [
    "model-usage.json",
    "model-calls.json",
    "model_calls.json",
    "cache-stats.json",
    "cache_stats.json",
]


@dataclass
class ReportData:
    """A run folder's contents as the report needs them; ``missing`` lists what was absent."""

    run_dir: Path
    run_config: dict[str, Any]  # config.json: config, config_hash, command, source
    manifest: dict[str, Any]
    decision: dict[str, Any]
    timings: dict[str, Any]
    model_stats: dict[str, Any]
    events: pd.DataFrame  # EVENT_FIELDS + summary_chars, summary_failed, over_limit, line
    # One row per (arm, metric, session) (evalkit.contracts.metrics_sessions): value is the session mean.
    metrics: pd.DataFrame
    missing: list[str] = field(default_factory=list)
    # Event-level values of the metrics a section takes a median of (EVENT_METRICS).
    event_values: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The exams' per-question grades (evalkit.contracts.questions): questions.parquet.
    questions: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Draws the sections' figures; the report makes it draw them in the background.
    figures: FigureDrawer = field(default_factory=FigureDrawer)

    @property
    def config(self) -> dict[str, Any]:
        return self.run_config.get("config", {})

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
        return list(self.decision.get("summary") or [])

    @property
    def verdicts(self) -> dict[str, Any]:
        return self.decision.get("verdicts") or {}

    @property
    def baseline(self) -> str:
        return "baseline" if "baseline" in self.arms or not self.arms else self.arms[0]


def _json(path: Path, missing: list[str], what: str) -> dict[str, Any]:
    if not path.exists():
        missing.append(f"`{path.name}` ({what})")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        missing.append(f"`{path.name}` is unreadable ({type(e).__name__}: {e})")
        return {}
    if not isinstance(data, dict):
        missing.append(f"`{path.name}` is unreadable (a JSON {type(data).__name__}, not an object)")
        return {}
    return data


def _decision(path: Path, missing: list[str]) -> dict[str, Any]:
    """``decision.json``: absent is a run not decided yet (a caveat); present but unreadable or of
    the wrong shape is a data error naming the file, not a report without its verdicts."""
    from evalkit.contracts.runs import RunFolderError, read_json_file

    if not path.exists():
        return _json(path, missing, "estimates and verdicts")
    d = read_json_file(path, "decision (an object)")
    verdicts = d.get("verdicts") or {}
    if not isinstance(verdicts, dict) or not all(isinstance(v, dict) for v in verdicts.values()):
        raise RunFolderError(f"{path}: field 'verdicts': not an object of objects")
    for arm, v in verdicts.items():
        if not isinstance(v.get("metrics") or {}, dict) or not all(
            isinstance(m, dict) for m in (v.get("metrics") or {}).values()
        ):
            raise RunFolderError(f"{path}: field 'verdicts.{arm}.metrics': not an object of objects")
    if not isinstance(d.get("summary") or [], list):
        raise RunFolderError(f"{path}: field 'summary': not a list")
    return d


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
    run_config = _json(run / "config.json", missing, "config, hash and reproduce command")
    manifest = _json(run / "corpus" / "manifest.json", missing, "corpus statistics")
    decision = _decision(run / "decision.json", missing)
    timings = _json(run / "timings.json", missing, "wall time per stage")
    model_stats: dict[str, Any] = {}
    for name in MODEL_STATS_FILES:
        if (run / name).exists():
            model_stats = _json(run / name, missing, "model calls and cache hits")
            break
    if not (run / "events").is_dir():
        missing.append("`events/` (compaction events)")
    else:
        # One arm's file gone: its counts and evidence would drop out of the report unremarked.
        for arm in run_config.get("config", {}).get("replay", {}).get("arms", []):
            if not events_path(run, arm).is_file():
                missing.append(
                    f"{code('events/' + events_path(run, arm).name)} (the {code(arm)} arm's compaction "
                    "events: its event counts and evidence are left out)"
                )
    events = read_event_table(run / "events")
    metrics = pd.DataFrame(columns=SESSION_COLUMNS)
    event_values = pd.DataFrame(columns=["arm", "session", "metric", "value"])
    if (run / "metrics.parquet").exists():
        try:
            metrics, event_values = session_table(run / "metrics.parquet", EVENT_METRICS)
        except (OSError, ValueError) as e:
            missing.append(f"`metrics.parquet` is unreadable ({type(e).__name__}: {e})")
    else:
        missing.append("`metrics.parquet` (the metrics table)")
    from evalkit.contracts import questions

    try:
        asked = questions.read(run)
    except (OSError, ValueError) as e:
        asked = questions.empty_frame()
        missing.append(f"`{questions.QUESTIONS_FILE}` is unreadable ({type(e).__name__}: {e})")
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
    )
