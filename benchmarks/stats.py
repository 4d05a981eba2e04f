"""Statistics benchmark: deciding 14 arms × 20 metrics × 2,000 sessions at 10,000 resamples.

Compared with the same sign-flip work done by ``scipy.stats.permutation_test`` (paired,
``permutation_type="samples"``) in a loop, one call per candidate × metric on the per-session mean
differences it is handed ready-made, and with the ``scipy.stats.bootstrap`` loop the earlier
bootstrap decide stage was measured against. Each scipy loop is timed on a subset of the
comparisons and extrapolated linearly: each call does the same work.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from benchmarks import Figure, benchmark

ARMS, METRICS, SESSIONS, RESAMPLES, EVENTS = 14, 20, 2_000, 10_000, 2
SCIPY_SUBSET = 6


def _table(rng: np.random.Generator) -> pd.DataFrame:
    from evalkit.contracts.metrics import normalize

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


@benchmark(
    "stats", "decide 14 arms × 20 metrics × 2,000 sessions at 10,000 resamples; vs scipy.stats.bootstrap"
)
def bench_stats() -> list[Figure]:
    from scipy import stats as sps

    from evalkit.decide import decide
    from evalkit.decide.rules import parse_rules

    rng = np.random.default_rng(1)
    df = _table(rng)
    metrics = sorted(set(df["metric"]))
    raw = {
        "resamples": RESAMPLES,
        "metrics": {m: {"direction": "higher", "min_effect": 0.05, "margin": 0.05} for m in metrics},
        "candidates": {
            f"cand{i:02d}": {"success": metrics[:2], "guardrails": metrics[2:]} for i in range(ARMS - 1)
        },
    }
    rules = parse_rules(raw, "bench")
    t = time.perf_counter()
    decision = decide(df, rules)
    ours = time.perf_counter() - t
    comparisons = (ARMS - 1) * METRICS + METRICS  # candidates × metrics, plus the A/A noise floor
    assert len(decision["verdicts"]) == ARMS - 1

    # scipy: one call per comparison on the per-session mean differences (the work after pairing).
    wide = df.pivot_table(index=["metric", "session"], columns="arm", values="value", aggfunc="mean")
    diffs = [
        (wide[a] - wide["baseline"]).xs(m, level="metric").to_numpy()
        for a in ("cand00", "aa")
        for m in metrics
    ]
    t = time.perf_counter()
    for d in diffs[:SCIPY_SUBSET]:
        sps.permutation_test(
            (d,),
            np.mean,
            permutation_type="samples",
            n_resamples=RESAMPLES,
            alternative="greater",
            random_state=0,
        )
    perm_each = (time.perf_counter() - t) / SCIPY_SUBSET
    t = time.perf_counter()
    for d in diffs[:SCIPY_SUBSET]:
        sps.bootstrap((d,), np.mean, n_resamples=RESAMPLES, method="percentile", random_state=0)
    boot_each = (time.perf_counter() - t) / SCIPY_SUBSET
    perm_total, boot_total = perm_each * comparisons, boot_each * comparisons
    return [
        Figure(f"evalkit decide, {comparisons} comparisons (incl. pairing from the tidy table)", ours, "s"),
        Figure(
            f"scipy.stats.permutation_test (sign flips), per comparison (mean of {SCIPY_SUBSET})",
            perm_each,
            "s",
        ),
        Figure(
            f"scipy.stats.permutation_test loop, {comparisons} comparisons (extrapolated)", perm_total, "s"
        ),
        Figure("speed-up over the scipy permutation_test loop", perm_total / ours, "×"),
        Figure(f"scipy.stats.bootstrap loop, {comparisons} comparisons (extrapolated)", boot_total, "s"),
        Figure("speed-up over the scipy bootstrap loop", boot_total / ours, "×"),
        Figure("metric rows in the table", float(len(df)), "rows"),
    ]
