"""The per-arm continuation table of a run folder (Markdown), labelled with the agent that made it."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from evalkit.continuation.metrics import is_continuation_metric
from evalkit.continuation.observational import ARM as OBSERVED
from evalkit.contracts.metrics import read_metrics
from evalkit.contracts.records import ContinuationManifest
from evalkit.contracts.runs import RunPaths, read_record


def arm_table(metrics: pd.DataFrame, manifest: dict) -> str:
    """Per arm: sessions, continuations, and the mean of per-session means of each continuation metric."""
    df = metrics[metrics["metric"].map(is_continuation_metric).astype(bool)]
    names = [m for m in manifest.get("metrics", []) if m in set(df["metric"])]
    ok = df[df["error"].isna()]
    per_session = ok.groupby(["arm", "metric", "session"], observed=True)["value"].mean()
    means = per_session.groupby(["arm", "metric"], observed=True).mean()
    arms = sorted(set(df["arm"]), key=lambda a: (a == OBSERVED, a != "baseline", a))
    label = manifest.get("label", manifest.get("agent", "?"))
    lines = [
        f"Continuation metrics, agent: {label}"
        + (
            " — PROXY: measures information availability, not model behaviour."
            if manifest.get("proxy")
            else ""
        ),
        f"Budget N = {manifest.get('max_calls')} calls; values are means of per-session means; "
        f"`{OBSERVED}` = the real agent after real recorded compactions.",
        "",
        "| arm | sessions | continuations | errors | " + " | ".join(names) + " |",
        "|---|---|---|---|" + "---|" * len(names),
    ]
    for arm in arms:
        sub = df[df["arm"] == arm]
        n_cont = sub[sub["metric"] == "calls_used"].shape[0]
        n_err = int(sub[sub["metric"] == "calls_used"]["error"].notna().sum())
        cells = [f"{means[(arm, m)]:.3f}" if (arm, m) in means.index else "–" for m in names]
        lines.append(
            f"| {arm} | {sub['session'].nunique()} | {n_cont} | {n_err} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def run_table(run_dir: str | os.PathLike) -> str:
    """The table for a run folder that has been through the continuation stage."""
    run = Path(run_dir)
    manifest = read_record(run, ContinuationManifest)
    if manifest is None:
        raise FileNotFoundError(f"{run}: no {ContinuationManifest.FILE} (run `evalkit continue {run}` first)")
    return arm_table(read_metrics(RunPaths(run).metrics), manifest.model_dump(exclude_unset=True))
