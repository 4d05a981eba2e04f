"""The issue's check table: per arm, the probes the candidates are expected to move.

Rows are arms; columns are means of per-session means (the decision stage's statistic) with the
number of sessions behind each. ``tally_left_view_early`` is the share of tallies (on the events
where the latest long test output left the view) whose line ends within the re-render's cut: a
head-only summarizer can keep at most about that share, so the baseline's
``tally_present_left_view`` should sit near it and ``head-tail`` should raise it.
"""

from __future__ import annotations

import os

import pandas as pd

from evalkit.contracts.metrics import read_metrics
from evalkit.contracts.runs import RunPaths

COLUMNS = [
    ("tally_left_view_early", "share ≤2,000"),
    ("tally_present_left_view", "tally_present (left view)"),
    ("tally_present", "tally_present (all)"),
    ("tally_in_summary", "tally_in_summary"),
    ("constraints_kept", "constraints_kept"),
    ("constraints_kept_normalized", "constraints_kept (norm.)"),
    ("growth", "growth (last÷round 1)"),
    ("stacked", "stacked"),
]


def check_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per arm: (mean of session means, sessions) of each column's metric; errors excluded."""
    ok = metrics[metrics["error"].isna() & metrics["metric"].isin([m for m, _ in COLUMNS])]
    per_session = ok.groupby(["arm", "metric", "session"], observed=True)["value"].mean().reset_index()
    agg = per_session.groupby(["arm", "metric"], observed=True)["value"].agg(["mean", "count"])
    events = ok[ok["metric"] == "tally_present_left_view"].groupby("arm", observed=True).size()
    rows = []
    for arm in sorted(metrics["arm"].unique()):
        row = {"arm": arm, "left-view events": int(events.get(arm, 0))}
        for metric, label in COLUMNS:
            if (arm, metric) in agg.index:
                mean, n = agg.loc[(arm, metric)]
                row[label] = f"{mean:.3f} (n={int(n)})"
            else:
                row[label] = "–"
        rows.append(row)
    return pd.DataFrame(rows)


def render_table(run_dir: str | os.PathLike) -> str:
    """The check table of a run folder as Markdown."""
    df = check_table(read_metrics(RunPaths(run_dir).metrics))
    header = list(df.columns)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v) for v in r) + " |")
    note = (
        "\nMeans of per-session means (n = sessions). 'left view': events whose compaction removed a "
        "test output longer than 2,000 chars; the latest such output's tally is looked for after the "
        "compaction. 'share ≤2,000': share of those tallies within the first 2,000 chars."
    )
    return "\n".join(lines) + "\n" + note
