"""Decide stage (walking skeleton): per arm and metric, the mean of session means.

The statistics issue replaces this with paired cluster-bootstrap intervals and ship rules; the
output file (``decision.json``) keeps its ``summary`` table so reports can rely on it.
"""

from __future__ import annotations

import os
from pathlib import Path

from evalkit.config import Experiment
from evalkit.corpus import write_json
from evalkit.metrics import read_metrics


def summarize_metrics(df) -> list[dict]:
    """Per (arm, metric): sessions, values, errors, and the mean of per-session means."""
    ok = df[df["error"].isna()]
    per_session = ok.groupby(["arm", "metric", "session"], observed=True)["value"].mean().reset_index()
    agg = per_session.groupby(["arm", "metric"], observed=True)["value"].agg(["count", "mean"]).reset_index()
    errors = df[df["error"].notna()].groupby(["arm", "metric"], observed=True).size()
    values = df.groupby(["arm", "metric"], observed=True).size()
    out = []
    for r in agg.itertuples(index=False):
        out.append(
            {
                "arm": r.arm,
                "metric": r.metric,
                "sessions": int(r.count),
                "mean": float(r.mean),
                "values": int(values.get((r.arm, r.metric), 0)),
                "errors": int(errors.get((r.arm, r.metric), 0)),
            }
        )
    return out


def decide_run(run_dir: str | os.PathLike, exp: Experiment) -> dict:
    run = Path(run_dir)
    df = read_metrics(run / "metrics.parquet")
    decision = {"summary": summarize_metrics(df), "verdicts": {}}
    write_json(run / "decision.json", decision)
    return decision
