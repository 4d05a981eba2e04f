"""Reading run folders back for analysis: ``evalkit.load_run(path)``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evalkit.contracts.event import read_events
from evalkit.contracts.metrics import read_metrics


class RunFolderError(ValueError):
    """A folder that is not a run folder, or a run-folder file that cannot be read as what it
    should hold; the message names the folder or file (the CLI: one line, exit 2)."""


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


def run_config(run: str | os.PathLike) -> dict[str, Any]:
    """``config.json`` of a run folder, checked: its ``config`` is an object (:class:`RunFolderError`)."""
    p = Path(run) / "config.json"
    body = read_json_file(p, "run config (an object with a 'config' object)")
    if not isinstance(body.get("config"), dict):
        raise RunFolderError(f"{p}: field 'config': missing or not an object")
    return body


def run_folder(path: str | os.PathLike | None, marks: tuple[str, ...] = ("config.json",)) -> Path:
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
    if (p / "config.json").is_file():
        run_config(p)
    return p


@dataclass
class Run:
    """A run folder's contents as plain values and DataFrames."""

    path: Path
    config: dict[str, Any]
    manifest: dict[str, Any]
    metrics: pd.DataFrame
    decision: dict[str, Any]

    def events(self, arm: str | None = None) -> pd.DataFrame:
        """Events as a DataFrame (one row per compaction; context entries left out)."""
        rows = []
        for p in sorted((self.path / "events").glob("*.jsonl")):
            if arm and p.stem != arm:
                continue
            for e in read_events(p):
                d = {k: v for k, v in e.__dict__.items() if k not in ("new_context", "request", "invariants")}
                d.update({f"inv_{k}": v for k, v in e.invariants.__dict__.items()})
                d["summary_chars"] = len(e.summary)
                rows.append(d)
        return pd.DataFrame(rows)


def load_run(path: str | os.PathLike) -> Run:
    """Open a run folder written by ``evalkit run``."""
    p = run_folder(path)
    decision = read_json_file(p / "decision.json") if (p / "decision.json").exists() else {}
    return Run(
        path=p,
        config=run_config(p)["config"],
        manifest=read_json_file(p / "corpus" / "manifest.json"),
        metrics=read_metrics(p / "metrics.parquet"),
        decision=decision,
    )


WARNINGS_FILE = "warnings.json"


def read_warnings(run_dir: str | os.PathLike) -> dict | None:
    """``warnings.json`` of a run (written by :mod:`evalkit.pipeline.warnings`), None when the run
    has none (written before warnings existed)."""
    p = Path(run_dir) / WARNINGS_FILE
    # An unreadable file is an error naming it, never "no warnings" (that would print "endpoint:
    # none, offline" for a run that sent its sessions somewhere).
    return read_json_file(p, "run warnings (an object)") if p.is_file() else None
