"""Paired candidate − baseline statistics with the session as the unit (REFERENCES.md §3).

Shape of the computation:

1. :func:`paired_differences` matches each candidate's rows with the baseline's on
   ``(metric, session, event)`` after averaging replicates, counts what exists in one arm only,
   and collapses every session to sums (of differences, of matched events, of each arm's values).
   Session-level metrics (``event = -1``) then pair per session by the same rule.
2. Every comparison is a column of a ``(sessions × comparisons)`` matrix, so one cluster
   bootstrap serves all of them: a resample is a vector of session draw counts ``w``, and each
   column's estimate is the ratio ``w·X / w·Y``. For the mean of session means ``X`` holds the
   session means and ``Y`` marks the sessions present; for the pooled estimand ``X`` holds sums
   of differences and ``Y`` event counts. Sessions are drawn from the experiment's session set, so
   a session absent from one comparison simply carries no weight there.
3. Intervals: expanded percentile (the decision interval; plain percentile on request), BCa (with a stated fallback to percentile where
   it is undefined), and the clustered-SE t interval on G − 1 degrees of freedom.

Intervals are two-sided at level ``1 − 2α`` so that a one-sided test at ``α`` rejects exactly when
the interval lies beyond the threshold: the verdict and the printed interval never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

ESTIMANDS = {"session_mean": "mean of session means", "pooled": "pooled mean over events"}
METHODS = {True: "cluster bootstrap (expanded percentile)", False: "cluster bootstrap (percentile)"}
# Rows of the (B × G) count matrix drawn at once: bounds memory at ~chunk·G·8 bytes.
CHUNK = 1000


@dataclass
class Paired:
    """Paired differences collapsed to sessions; column k is comparison ``columns[k]`` = (arm, metric)."""

    columns: list[tuple[str, str]]
    sessions: np.ndarray  # (G,) session ids, the resampling units
    diff_sum: np.ndarray  # (G, K) Σ (candidate − baseline) over matched events
    count: np.ndarray  # (G, K) matched events (0 = session absent from this comparison)
    base_sum: np.ndarray  # (G, K) Σ baseline values over matched events
    cand_sum: np.ndarray  # (G, K) Σ candidate values over matched events
    unmatched: np.ndarray  # (K,) (session, event) keys present in one arm only
    unmatched_sessions: np.ndarray  # (K,) sessions present in one arm only
    errors: np.ndarray  # (K,) rows with a scorer error (NaN value), both arms
    rows: np.ndarray  # (K,) rows in both arms, errors included
    degenerate: np.ndarray  # (K,) every value equal in both arms: the metric cannot tell them apart


def paired_differences(df: pd.DataFrame, columns: Sequence[tuple[str, str]], baseline: str) -> Paired:
    """Collapse a tidy metrics table to per-session paired sums for each (arm, metric) in ``columns``."""
    columns = list(columns)
    K = len(columns)
    col_index = {c: k for k, c in enumerate(columns)}
    arms = {a for a, _ in columns}
    metrics = {m for _, m in columns}
    df = df[df["metric"].isin(metrics) & df["arm"].isin(arms | {baseline})]
    # Integer codes instead of strings for the joins and groupbys below: 1–2 orders of magnitude faster.
    df = df.assign(
        arm=df["arm"].astype(str).astype("category"),
        metric=df["metric"].astype(str).astype("category"),
        session=df["session"].astype(str).astype("category"),
    )
    bad = df["value"].isna() | df["error"].notna()
    per_arm_rows = df.groupby(["arm", "metric"], observed=True).size()
    per_arm_errors = df[bad].groupby(["arm", "metric"], observed=True).size()

    # Replicates are averaged within (session, event) first: they are repeated draws of one unit.
    ok = df[~bad]
    keys = ["arm", "metric", "session", "event"]
    if len(ok):
        ev = ok.groupby(keys, sort=False, observed=True)["value"].mean().reset_index()
    else:
        ev = pd.DataFrame({k: pd.Series(dtype=object) for k in keys} | {"value": pd.Series(dtype=float)})
    base = ev[ev["arm"] == baseline].drop(columns="arm").rename(columns={"value": "b"})
    cand = ev[ev["arm"] != baseline]
    # Attaching the column index by merge keeps Python loops off the (large) row axis.
    col_frame = pd.DataFrame(columns, columns=["arm", "metric"]).assign(k=np.arange(K))
    known = col_frame["arm"].isin(df["arm"].cat.categories) & col_frame["metric"].isin(df["metric"].cat.categories)
    col_frame = col_frame[known].astype({"arm": cand["arm"].dtype, "metric": cand["metric"].dtype})
    cand = cand.merge(col_frame, on=["arm", "metric"], how="inner")
    pairs = cand.merge(base, on=["metric", "session", "event"], how="inner")
    pairs["d"] = pairs["value"] - pairs["b"]

    sessions = np.array(sorted(df["session"].unique()), dtype=object)
    G = len(sessions)
    shape = (G, K)
    diff_sum, count, base_sum, cand_sum = (np.zeros(shape) for _ in range(4))
    if len(pairs):
        per_s = (
            pairs.groupby(["k", "session"], sort=False, observed=True)
            .agg(d=("d", "sum"), n=("d", "size"), b=("b", "sum"), c=("value", "sum"))
            .reset_index()
        )
        gi = pd.Categorical(per_s["session"], categories=sessions).codes
        ki = per_s["k"].to_numpy()
        diff_sum[gi, ki] = per_s["d"].to_numpy()
        count[gi, ki] = per_s["n"].to_numpy()
        base_sum[gi, ki] = per_s["b"].to_numpy()
        cand_sum[gi, ki] = per_s["c"].to_numpy()

    def per_col(series_by_arm_metric, default=0):
        return np.array([series_by_arm_metric.get(c, default) for c in columns])

    def per_metric(series_by_metric):
        return np.array([series_by_metric.get(m, 0) for _, m in columns])

    keys_c = per_col(cand.groupby(["arm", "metric"], observed=True).size())
    keys_b = per_metric(base.groupby("metric", observed=True).size())
    matched = per_col(pairs.groupby(["arm", "metric"], observed=True).size())
    sess_c = per_col(cand.groupby(["arm", "metric"], observed=True)["session"].nunique())
    sess_b = per_metric(base.groupby("metric", observed=True)["session"].nunique())
    sess_m = per_col(pairs.groupby(["arm", "metric"], observed=True)["session"].nunique())

    errors = np.array(
        [per_arm_errors.get(c, 0) + per_arm_errors.get((baseline, c[1]), 0) for c in columns], dtype=int
    )
    rows = np.array([per_arm_rows.get(c, 0) + per_arm_rows.get((baseline, c[1]), 0) for c in columns], dtype=int)
    degenerate = np.zeros(K, dtype=bool)
    if len(pairs):
        rng = pairs.groupby(["arm", "metric"], observed=True).agg(
            lo=("value", "min"), hi=("value", "max"), blo=("b", "min"), bhi=("b", "max")
        )
        flat = rng[(rng["lo"] == rng["hi"]) & (rng["blo"] == rng["bhi"]) & (rng["lo"] == rng["blo"])]
        for c in flat.index:
            degenerate[col_index[c]] = True
    return Paired(
        columns=columns,
        sessions=sessions,
        diff_sum=diff_sum,
        count=count,
        base_sum=base_sum,
        cand_sum=cand_sum,
        unmatched=(keys_c + keys_b - 2 * matched).astype(int),
        unmatched_sessions=(sess_c + sess_b - 2 * sess_m).astype(int),
        errors=errors,
        rows=rows,
        degenerate=degenerate,
    )


def estimand_matrices(sums: np.ndarray, count: np.ndarray, estimand: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, Y) such that the estimate of column k is ΣX[:,k] / ΣY[:,k] (and w·X / w·Y under resampling)."""
    if estimand == "session_mean":
        present = count > 0
        return np.divide(sums, count, out=np.zeros_like(sums), where=present), present.astype(float)
    if estimand == "pooled":
        return sums, count.astype(float)
    raise ValueError(f"unknown estimand {estimand!r} (known: {', '.join(ESTIMANDS)})")


def resample_counts(rng: np.random.Generator, G: int, b: int) -> np.ndarray:
    """``b`` cluster-bootstrap resamples as a (b × G) matrix of how often each session is drawn."""
    idx = rng.integers(0, G, size=(b, G))
    idx += (np.arange(b) * G)[:, None]
    return np.bincount(idx.ravel(), minlength=b * G).reshape(b, G).astype(float)


def bootstrap_ratio(X: np.ndarray, Y: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(B × K) bootstrap replicates of ΣX/ΣY, resampling rows (sessions) with one shared draw per resample.

    Columns whose ``Y`` is identical (the usual case: every comparison covers every session) share
    one denominator product. A replicate whose resample holds none of a column's sessions is NaN
    and is ignored by the summaries below.
    """
    G, K = X.shape
    if G == 0 or K == 0:
        return np.full((resamples, K), np.nan)
    rng = np.random.default_rng(seed)
    Yu, y_of = np.unique(Y, axis=1, return_inverse=True)
    y_of = np.asarray(y_of).ravel()
    out = np.empty((resamples, K))
    for start in range(0, resamples, CHUNK):
        b = min(CHUNK, resamples - start)
        W = resample_counts(rng, G, b)
        den = (W @ Yu)[:, y_of]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + b] = np.where(den > 0, (W @ X) / np.where(den > 0, den, 1), np.nan)
    return out


@dataclass
class Estimates:
    """Point estimates and intervals per column (all arrays of length K, finite or NaN only where noted)."""

    estimate: np.ndarray
    se: np.ndarray  # clustered standard error (NaN when fewer than 2 sessions)
    ci: np.ndarray  # (K, 2) percentile (or expanded percentile) interval at level 1 − 2α
    ci_t: np.ndarray  # (K, 2) clustered-SE t interval on G − 1 df (NaN when fewer than 2 sessions)
    ci_bca: np.ndarray  # (K, 2) BCa interval, or the percentile one where BCa is undefined
    bca_note: list[str]  # "" where BCa was used, else why it fell back to percentile
    n_sessions: np.ndarray  # sessions contributing to each column
    boot: np.ndarray  # (B, K) bootstrap replicates, for p-values
    expanded: bool  # whether the small-sample expansion was applied (see :func:`expansion`)


def expansion(n_sessions) -> np.ndarray:
    """Hesterberg's small-sample expansion of the percentile method: the factor on the z scale.

    The plain percentile interval of a mean is too narrow with few clusters: it uses the
    population variance (÷G, not ÷(G−1)) and normal instead of t quantiles; with 40 sessions it
    covers about 93.5% at a nominal 95%. The expanded percentile interval (Hesterberg 2015, "What
    teachers should know about the bootstrap") reads the bootstrap distribution at
    Φ(√(G/(G−1)) · t_{G−1}) instead of Φ(z). Here it is applied as a monotone map of levels, so the
    interval and the p-values stay dual. The returned value c maps a t-quantile to a z-quantile.
    """
    n = np.maximum(np.asarray(n_sessions, dtype=float), 2)
    return np.sqrt(n / (n - 1))


def _levels(alpha: float, n_sessions, expanded: bool) -> np.ndarray:
    """Lower quantile level of the bootstrap distribution per column (upper is 1 − this)."""
    n = np.asarray(n_sessions)
    if not expanded:
        return np.full(n.shape, alpha, dtype=float)
    return sps.norm.cdf(-expansion(n) * sps.t.ppf(1 - alpha, np.maximum(n - 1, 1)))


def column_quantiles(boot: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-column quantiles (linear interpolation) at per-column levels ``q`` of shape (K, L), NaN ignored."""
    s = np.sort(boot, axis=0)  # NaN sorts last
    nv = np.isfinite(boot).sum(axis=0)
    pos = q * np.maximum(nv - 1, 0)[:, None]
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, np.maximum(nv - 1, 0)[:, None])
    k = np.arange(boot.shape[1])[:, None]
    frac = pos - lo
    out = s[lo, k] * (1 - frac) + s[hi, k] * frac
    return np.where(nv[:, None] > 0, out, np.nan)


def estimate(
    X: np.ndarray, Y: np.ndarray, alpha: float, resamples: int, seed: int, expanded: bool = True
) -> Estimates:
    """Bootstrap the ratio estimand of every column; intervals at two-sided level 1 − 2α."""
    present = Y > 0
    n = present.sum(axis=0)
    sx, sy = X.sum(axis=0), Y.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = np.where(sy > 0, sx / np.where(sy > 0, sy, 1), np.nan)
        # Linearised (cluster-robust) SE of a ratio: residuals u_g = X_g − θ·Y_g summed within session.
        u = np.where(present, X - theta * Y, 0.0)
        se = np.sqrt(n / np.maximum(n - 1, 1) * (u**2).sum(axis=0)) / np.where(sy > 0, sy, 1)
    # Constant differences leave only rounding residue in the SE; call it what it is: zero.
    se = np.where(se <= 1e-12 * (np.abs(theta) + 1), 0.0, se)
    se = np.where(n >= 2, se, np.nan)
    boot = bootstrap_ratio(X, Y, resamples, seed)
    a = _levels(alpha, n, expanded)
    ci = column_quantiles(boot, np.stack([a, 1 - a], axis=1))
    t = sps.t.ppf(1 - alpha, np.maximum(n - 1, 1))
    ci_t = np.stack([theta - t * se, theta + t * se], axis=1)
    ci_bca, notes = bca_intervals(X, Y, theta, boot, alpha, ci)
    return Estimates(theta, se, ci, ci_t, ci_bca, notes, n, boot, expanded)


def bca_intervals(X, Y, theta, boot, alpha, fallback) -> tuple[np.ndarray, list[str]]:
    """Bias-corrected and accelerated intervals, acceleration from the leave-one-session-out jackknife.

    Where BCa is undefined (fewer than 3 sessions, every replicate on one side of the estimate, or
    a constant jackknife as with constant data) the percentile interval is used and the reason noted;
    scipy returns NaN in those cases.
    """
    K = X.shape[1]
    out = np.array(fallback, dtype=float, copy=True)
    notes = [""] * K
    sx, sy = X.sum(axis=0), Y.sum(axis=0)
    for k in range(K):
        present = Y[:, k] > 0
        n = int(present.sum())
        if n < 3:
            notes[k] = "percentile (BCa needs at least 3 sessions)"
            continue
        b = boot[:, k]
        b = b[np.isfinite(b)]
        frac = np.mean(b < theta[k])
        if frac <= 0 or frac >= 1:
            notes[k] = "percentile (constant data: BCa undefined)"
            continue
        jack = (sx[k] - X[present, k]) / (sy[k] - Y[present, k])
        dev = jack.mean() - jack
        denom = (dev**2).sum()
        if not np.isfinite(denom) or denom <= 0:
            notes[k] = "percentile (constant data: BCa undefined)"
            continue
        a = (dev**3).sum() / (6 * denom**1.5)
        z0 = sps.norm.ppf(frac)
        z = sps.norm.ppf([alpha, 1 - alpha])
        q = sps.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
        if not np.all(np.isfinite(q)):
            notes[k] = "percentile (BCa levels not finite)"
            continue
        out[k] = np.quantile(b, q)  # BCa keeps the plain levels: it corrects bias and skew, not n
    return out, notes


def p_value(est: Estimates, threshold: np.ndarray | float, side: str) -> np.ndarray:
    """One-sided bootstrap p-values per column, dual to the interval in ``est.ci``.

    ``side="greater"`` tests H0: θ ≤ threshold (superiority, non-inferiority); ``"less"`` tests
    H0: θ ≥ threshold (inferiority). The percentile p is (1 + #replicates on the null side) /
    (1 + #replicates), never 0; with the expansion it is mapped through the same level map as the
    interval, so p < α exactly when the interval's bound lies beyond the threshold.
    """
    if side not in ("greater", "less"):
        raise ValueError(f"side must be 'greater' or 'less', not {side!r}")
    boot = est.boot
    thr = np.broadcast_to(np.asarray(threshold, dtype=float), boot.shape[1:])
    valid = np.isfinite(boot)
    on_null = (boot <= thr) if side == "greater" else (boot >= thr)
    p = (1 + (on_null & valid).sum(axis=0)) / (1 + valid.sum(axis=0))
    if est.expanded:
        n = np.maximum(est.n_sessions, 2)
        p = sps.t.cdf(sps.norm.ppf(p) / expansion(n), n - 1)
    return np.clip(p, 0.0, 1.0)


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values: sort, p_(k)·(m − k + 1), running maximum, cap at 1."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adj
    return out


def z_sum(alpha: float, power: float) -> float:
    """z_{1−α} + z_{power}: one-sided test at α with the given power."""
    return float(sps.norm.ppf(1 - alpha) + sps.norm.ppf(power))


def mde(se: np.ndarray | float, alpha: float, power: float) -> np.ndarray:
    """Minimum detectable effect (against zero) at the observed clustered SE."""
    return z_sum(alpha, power) * np.asarray(se, dtype=float)


def achieved_power(effect, se, alpha: float) -> np.ndarray:
    """Power of the one-sided test at α to detect a true effect of size ``effect`` given the SE."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return sps.norm.cdf(np.abs(effect) / np.asarray(se, dtype=float) - sps.norm.ppf(1 - alpha))


def sessions_needed(effect, se, n_sessions, alpha: float, power: float) -> np.ndarray:
    """n = (z_{1−α} + z_β)² · ω² / δ², with ω² = G · SE² the variance of per-session differences."""
    omega2 = np.asarray(n_sessions, dtype=float) * np.asarray(se, dtype=float) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.ceil(z_sum(alpha, power) ** 2 * omega2 / np.asarray(effect, dtype=float) ** 2)
    return np.maximum(n, 2)  # a variance needs two sessions, however clear the effect
