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
    p = Path(path)
    if not (p / "config.json").exists():
        raise FileNotFoundError(f"{p}: not a run folder (no config.json)")
    decision = json.loads((p / "decision.json").read_text()) if (p / "decision.json").exists() else {}
    return Run(
        path=p,
        config=json.loads((p / "config.json").read_text())["config"],
        manifest=json.loads((p / "corpus" / "manifest.json").read_text()),
        metrics=read_metrics(p / "metrics.parquet"),
        decision=decision,
    )


WARNINGS_FILE = "warnings.json"


def read_warnings(run_dir: str | os.PathLike) -> dict | None:
    """``warnings.json`` of a run (written by :mod:`evalkit.pipeline.warnings`), None when the run
    has none (written before warnings existed)."""
    p = Path(run_dir) / WARNINGS_FILE
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # unreadable: shown as no warnings recorded, never as a crash of the report
