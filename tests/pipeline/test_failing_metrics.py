"""The run warning for metrics that mostly failed, counted a row group at a time."""

from __future__ import annotations

import pandas as pd

from evalkit.contracts.metrics_stream import ROW_GROUP_ROWS, write_metrics
from evalkit.pipeline.warnings import failing_metrics


def _whole_table(path, share):
    """The warning as it was computed from the whole table at once (the reference)."""
    m = pd.read_parquet(path, columns=["metric", "error"])
    groups = {}
    for metric, g in m.groupby("metric", sort=True):
        errs = g.error.dropna()
        if len(g) and len(errs) / len(g) > share:
            pct = f"{len(errs)} of {len(g)} rows ({len(errs) / len(g):.0%})"
            groups.setdefault((pct, str(errs.iloc[0])[:160]), []).append(str(metric))
    return [f"{', '.join(n)}: {p} are errors, above {share:.0%} (first: {f})" for (p, f), n in groups.items()]


def test_counts_span_row_groups_and_match_the_whole_table(tmp_path):
    sessions = 3 * ROW_GROUP_ROWS // 4  # 4 metrics a session: three row groups
    rows = []
    for s in range(sessions):
        for metric, fails in (
            ("judge", s % 2 == 0),
            ("tally", s >= sessions - 2),
            ("b_first", s > 10),
            ("size", False),
        ):
            err = f"{metric} failed in s{s:05d}" if fails else None
            rows.append(("r", "baseline", f"s{s:05d}", 0, 0, 0, metric, None if err else 1.0, err))
    path = tmp_path / "metrics.parquet"
    write_metrics(pd.DataFrame(rows, columns=["run", "arm", "session", "event", "round", "replicate", "metric", "value", "error"]), path)  # fmt: skip

    got = [w.text for w in failing_metrics(tmp_path, 0.05)]

    assert got == _whole_table(path, 0.05)
    assert got == [
        f"b_first: {sessions - 11} of {sessions} rows (100%) are errors, above 5% (first: b_first failed in s00011)",
        f"judge: {sessions // 2} of {sessions} rows (50%) are errors, above 5% (first: judge failed in s00000)",
    ]
