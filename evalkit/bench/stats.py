"""Statistics benchmark: deciding 14 arms × 20 metrics × 2,000 sessions at 10,000 resamples.

Compared with the same bootstrap work done by ``scipy.stats.bootstrap`` in a loop (one call per
candidate × metric, on the per-session mean differences it is handed ready-made, percentile
method). The scipy loop is timed on a subset of the comparisons and extrapolated linearly: each
call does the same work, and the full loop would take minutes.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from evalkit.bench import Figure, benchmark

ARMS, METRICS, SESSIONS, RESAMPLES, EVENTS = 14, 20, 2_000, 10_000, 2
SCIPY_SUBSET = 6


def _table(rng: np.random.Generator) -> pd.DataFrame:
    from evalkit.metrics import normalize

    arms = ["baseline"] + [f"cand{i:02d}" for i in range(ARMS - 1)] + ["aa"]
    metrics = [f"m{j:02d}" for j in range(METRICS)]
    n = len(arms) * len(metrics) * SESSIONS * EVENTS
    shape = (len(arms), len(metrics), SESSIONS, EVENTS)
    value = rng.normal(size=shape) + rng.normal(size=(1, len(metrics), SESSIONS, 1))
    grid = np.indices(shape).reshape(4, -1)
    return normalize(
        pd.DataFrame(
            {
                "run": "bench",
                "arm": np.array(arms)[grid[0]],
                "session": np.char.add("s", grid[2].astype(str)),
                "event": grid[3],
                "round": grid[3],
                "replicate": 0,
                "metric": np.array(metrics)[grid[1]],
                "value": value.reshape(-1),
                "error": pd.Series([None] * n, dtype="string"),
            }
        )
    )


@benchmark("stats", "decide 14 arms × 20 metrics × 2,000 sessions at 10,000 resamples; vs scipy.stats.bootstrap")
def bench_stats() -> list[Figure]:
    from scipy import stats as sps

    from evalkit.decide import decide
    from evalkit.rules import parse_rules

    rng = np.random.default_rng(1)
    df = _table(rng)
    metrics = sorted(set(df["metric"]))
    raw = {
        "resamples": RESAMPLES,
        "metrics": {m: {"direction": "higher", "min_effect": 0.05, "margin": 0.05} for m in metrics},
        "candidates": {f"cand{i:02d}": {"success": metrics[:2], "guardrails": metrics[2:]} for i in range(ARMS - 1)},
    }
    rules = parse_rules(raw, "bench")
    t = time.perf_counter()
    decision = decide(df, rules)
    ours = time.perf_counter() - t
    comparisons = (ARMS - 1) * METRICS + METRICS  # candidates × metrics, plus the A/A noise floor
    assert len(decision["verdicts"]) == ARMS - 1

    # scipy: one call per comparison on the per-session mean differences (the work after pairing).
    wide = df.pivot_table(index=["metric", "session"], columns="arm", values="value", aggfunc="mean")
    diffs = [(wide[a] - wide["baseline"]).xs(m, level="metric").to_numpy() for a in ("cand00", "aa") for m in metrics]
    t = time.perf_counter()
    for d in diffs[:SCIPY_SUBSET]:
        sps.bootstrap((d,), np.mean, n_resamples=RESAMPLES, method="percentile", random_state=0)
    scipy_each = (time.perf_counter() - t) / SCIPY_SUBSET
    scipy_total = scipy_each * comparisons
    return [
        Figure(f"evalkit decide, {comparisons} comparisons (incl. pairing from the tidy table)", ours, "s"),
        Figure(f"scipy.stats.bootstrap percentile, per comparison (mean of {SCIPY_SUBSET})", scipy_each, "s"),
        Figure(f"scipy.stats.bootstrap loop, {comparisons} comparisons (extrapolated)", scipy_total, "s"),
        Figure("speed-up over the scipy loop", scipy_total / ours, "×"),
        Figure("metric rows in the table", float(len(df)), "rows"),
    ]
