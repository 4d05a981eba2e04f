"""Paired candidate − baseline statistics with the session as the unit (REFERENCES.md §3).

Shape of the computation:

1. :func:`paired_differences` (in :mod:`evalkit.decide.pairing`) matches each candidate's rows
   with the baseline's on ``(metric, session, event)`` after averaging replicates and collapses
   every session to sums; each comparison is a column of a ``(sessions × comparisons)`` matrix.
2. The estimate of column k is ΣX[:,k] / ΣY[:,k]: for the mean of session means ``X`` holds the
   session mean differences and ``Y`` marks the sessions present; for the pooled estimand ``X``
   holds sums of differences and ``Y`` event counts.
3. Tests: a paired sign-flip randomization test (Fisher 1935; Good 2005). Under the null that the
   candidate's effect is exactly δ, the session's shifted contribution z_g = X_g − δ·Y_g is as
   likely to have either sign (swapping the arms' labels within a session flips it), so
   T = Σ z_g is compared with Σ s_g·z_g over sign vectors s. Where at most :data:`EXACT_MAX`
   sessions are present, or only that many differ from the baseline, every sign pattern of those
   sessions appears equally often among the sign vectors and p = #{T_s ≥ T} / B is exact (at every
   threshold, or at zero); otherwise ``resamples`` random sign vectors from a seeded generator and
   p = (1 + #{T_s ≥ T}) / (1 + B), valid at any B (Phipson & Smyth 2010). Where no
   random draw reaches T the p-value is the smaller of 1/(1+B) and Hoeffding's bound
   exp(−T²/2Σz²) (Hoeffding 1963), so Holm over many tests is not held up by a Monte Carlo floor.
   Against a non-zero threshold (min effect, margin) the shifted z_g need not be symmetric (the
   test is then only asymptotically valid, Romano 1990); the t test below is required there too.
4. Interval (``ci``, the decision interval): the session-cluster bootstrap of
   :mod:`evalkit.decide.bootstrap` (bootstrap-t by default; percentile or BCa by the rules'
   ``interval``), whose own one-sided test is read off the same resamples. The decision p-value
   (:func:`p_value`) is the larger of that test's and the sign-flip test's, so a verdict never
   contradicts the printed interval, and where few sessions differ (no test of size α can reject
   with ≤ 5 differing sessions) the exact sign-flip test is the requirement that decides.
   ``ci_sign_flip``: the sign-flip test inverted (Hartigan 1969's random-subsample means), for
   comparison only.
5. Design numbers (MDE, power, sessions needed) are in :mod:`evalkit.decide.design`.

Intervals are two-sided at level ``1 − 2α`` so that a one-sided test at ``α`` rejects exactly when
the interval lies beyond the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as sps

from evalkit.decide import bootstrap
from evalkit.decide.pairing import Paired, paired_differences

__all__ = ["Paired", "paired_differences"]

ESTIMANDS = {"session_mean": "mean of session means", "pooled": "pooled mean over events"}
METHOD = (
    "session-cluster bootstrap interval and its own test from the same resamples, and the paired "
    "sign-flip randomization test over sessions (exact where ≤ 2^12 sign patterns matter)"
)
# Rows of the (B × G) sign matrix drawn at once: bounds memory at ~chunk·G·8 bytes.
CHUNK = 1000
# Enumerate every sign pattern when at most this many sessions contribute: 4,096 patterns.
EXACT_MAX = 12


def estimand_matrices(sums: np.ndarray, count: np.ndarray, estimand: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, Y) such that the estimate of column k is ΣX[:,k] / ΣY[:,k] (and w·X / w·Y under resampling)."""
    if estimand == "session_mean":
        present = count > 0
        return np.divide(sums, count, out=np.zeros_like(sums), where=present), present.astype(float)
    if estimand == "pooled":
        return sums, count.astype(float)
    raise ValueError(f"unknown estimand {estimand!r} (known: {', '.join(ESTIMANDS)})")


def flip_draws(rng: np.random.Generator, G: int, b: int) -> np.ndarray:
    """``b`` random sign vectors as a (b × G) 0/1 matrix F: session g's arms are swapped where F = 1.

    Eight fair bits per random byte: drawing bytes and unpacking them is ~8× cheaper than one
    integer per bit, and the bits are just as uniform and independent."""
    bytes_ = rng.integers(0, 256, size=(b, (G + 7) // 8), dtype=np.uint8)
    return np.unpackbits(bytes_, axis=1, count=G).astype(float)


def _pattern_bits(rows: int, k: int) -> np.ndarray:
    """(rows × k) 0/1: row r holds the bits of r mod 2^k, so each of the 2^k patterns fills rows/2^k rows."""
    return ((np.arange(rows)[:, None] % (1 << k)) >> np.arange(k)) & 1


def flip_sums(
    X: np.ndarray, Y: np.ndarray, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(FX, FY, exact): Σ over the swapped sessions of X and of Y per sign vector (B × K), and per column
    whether its reference set is balanced (p = #/B, exact where it matters; else (1 + #)/(1 + B)).

    One random draw is shared by every comparison (one matrix product). A column with at most
    :data:`EXACT_MAX` sessions present, or with at most that many differing from zero, gets those
    sessions' bits replaced by every one of their 2^k sign patterns in equal numbers (B is rounded up
    to a multiple of 2^k): its reference distribution is then exact at every threshold (few sessions)
    or at zero (few differing sessions; the others keep their random bits), and the interval drawn
    from the same rows agrees with the exact p-value.
    """
    G, K = X.shape
    present = Y > 0
    n, nz = present.sum(axis=0), (present & (X != 0)).sum(axis=0)
    exact = (n <= EXACT_MAX) | (nz <= EXACT_MAX)
    kmax = int(max(np.where(n <= EXACT_MAX, n, np.where(exact, nz, 0)).max(initial=0), 0))
    B = -(-resamples // (1 << kmax)) * (1 << kmax) if exact.any() else resamples
    if G == 0 or K == 0:
        return np.zeros((B, K)), np.zeros((B, K)), exact
    rng = np.random.default_rng(seed)
    Yu, y_of = np.unique(Y, axis=1, return_inverse=True)
    y_of = np.asarray(y_of).ravel()
    balanced = {
        k: np.flatnonzero(present[:, k] if n[k] <= EXACT_MAX else present[:, k] & (X[:, k] != 0))
        for k in np.flatnonzero(exact)
    }
    kept = np.unique(np.concatenate([np.arange(0), *balanced.values()])).astype(int)
    at = np.full(G, -1)
    at[kept] = np.arange(len(kept))
    FX, FY, Fk = np.empty((B, K)), np.empty((B, K)), np.empty((B, len(kept)))
    for start in range(0, B, CHUNK):
        b = min(CHUNK, B - start)
        F = flip_draws(rng, G, b)
        FX[start : start + b] = F @ X
        FY[start : start + b] = (F @ Yu)[:, y_of]
        Fk[start : start + b] = F[:, kept]  # the random bits the balanced patterns replace
    for k, rows in balanced.items():
        P = _pattern_bits(B, len(rows)) - Fk[:, at[rows]]
        FX[:, k] += P @ X[rows, k]
        FY[:, k] += P @ Y[rows, k]
    # Sums that cancel exactly (+1/3 +1/3 +1/3 −1) leave rounding residue: call it zero, with the same
    # tolerance p_value uses for ties, so the interval and the p-value count the same draws at zero.
    tie = 0.5e-9 * (np.abs(X).sum(axis=0) + 1e-300)
    FX[np.abs(FX) <= tie] = 0.0
    return FX, FY, exact


@dataclass
class Estimates:
    """Point estimates, intervals and the randomization draws per column (arrays of length K)."""

    estimate: np.ndarray
    se: np.ndarray  # clustered standard error (NaN when fewer than 2 sessions)
    ci: np.ndarray  # (K, 2) decision interval: the session bootstrap's at 1 − 2α (NaN below 2 sessions)
    ci_sign_flip: np.ndarray  # (K, 2) the inverted sign-flip test at level 1 − 2α, for comparison
    n_sessions: np.ndarray  # sessions contributing to each column
    differing: np.ndarray  # sessions whose difference is not zero
    X: np.ndarray  # (G, K) as passed in, oriented by :meth:`oriented`
    Y: np.ndarray  # (G, K)
    FX: np.ndarray  # (B, K) Σ X over the swapped sessions of each sign vector
    FY: np.ndarray  # (B, K)
    exact: np.ndarray  # (K,) balanced reference set: p = #/B (see flip_sums)
    draws: bootstrap.Draws  # the session bootstrap's θ* and T* (B × K)
    method: str = "bootstrap-t"  # which bootstrap interval ``ci`` is (bootstrap.METHODS)

    def oriented(self, sign: np.ndarray) -> Estimates:
        """The same estimates with column k multiplied by sign[k] (so that "greater" means better)."""
        s = np.asarray(sign, dtype=float)
        ci = np.sort(self.ci * s[:, None], axis=1)
        flip = np.sort(self.ci_sign_flip * s[:, None], axis=1)
        return replace(
            self,
            estimate=self.estimate * s,
            ci=ci,
            ci_sign_flip=flip,
            X=self.X * s,
            FX=self.FX * s,
            draws=self.draws.oriented(s),
        )


def _scale_floor(X: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Rounding residue of each column, relative to its own values: SEs below it are exactly zero."""
    return _floor(present.sum(axis=0), np.abs(np.where(present, X, 0.0)).max(axis=0, initial=0.0))


def _floor(n: np.ndarray, largest: np.ndarray) -> np.ndarray:
    return 1e-12 * np.sqrt(n) * largest


@dataclass
class Point:
    """Per column: the estimate, its clustered SE and t interval (the noise floor's interval), sessions
    present and sessions whose difference is not zero. What a column needs without sign-flip draws."""

    estimate: np.ndarray
    se: np.ndarray  # NaN when fewer than 2 sessions
    ci: np.ndarray  # (K, 2) at level 1 − 2α
    n_sessions: np.ndarray
    differing: np.ndarray


def point_estimates(col: np.ndarray, x: np.ndarray, y: np.ndarray, K: int, alpha: float) -> Point:
    """:class:`Point` of K columns given as their present cells only: the column of each cell and its
    X and Y (Y > 0), each column's cells in session order.

    A sparse matrix in these three arrays costs its cells, not G·K: the A/A arm has a column for
    every metric in the table, and most metrics (one per question) are present in one session.
    :func:`estimate` reduces a dense matrix's present cells through this same function (sums in
    session order), so a column gets the same numbers from either form.
    """
    col = np.asarray(col, dtype=np.int64)
    n = np.bincount(col, minlength=K)
    sx, sy = np.bincount(col, x, K), np.bincount(col, y, K)
    largest = np.zeros(K)
    np.maximum.at(largest, col, np.abs(x))
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = np.where(sy > 0, sx / np.where(sy > 0, sy, 1), np.nan)
        # Linearised (cluster-robust) SE of a ratio: residuals u_g = X_g − θ·Y_g summed within session.
        u = x - np.nan_to_num(theta)[col] * y
        ss = np.sqrt(np.bincount(col, u**2, K))
        se = np.sqrt(n / np.maximum(n - 1, 1)) * ss / np.where(sy > 0, sy, 1)
    # Constant differences leave only rounding residue in the SE; call it what it is: zero. The cut
    # is relative to the column's own magnitude, so metrics in tiny units keep their real SE.
    se = np.where(ss <= _floor(n, largest), 0.0, se)
    se = np.where(n >= 2, se, np.nan)
    t = sps.t.ppf(1 - alpha, np.maximum(n - 1, 1))
    ci = np.stack([theta - t * se, theta + t * se], axis=1)
    return Point(theta, se, ci, n, np.bincount(col, x != 0, K).astype(n.dtype))


def estimate(
    X: np.ndarray,
    Y: np.ndarray,
    alpha: float,
    resamples: int,
    seed: int,
    interval: bool = True,
    method: str = "bootstrap-t",
) -> Estimates:
    """Estimate, SE, the session bootstrap interval (``method``, the decision interval) and the
    inverted sign-flip interval of every column at level 1 − 2α; ``resamples`` sign vectors and as
    many session resamples.

    ``interval=False`` skips both intervals (NaN) for callers that only need p-values."""
    if method not in bootstrap.METHODS:
        raise ValueError(f"unknown interval {method!r} (known: {', '.join(bootstrap.METHODS)})")
    present = Y > 0
    _g, col = np.nonzero(present)  # row-major: each column's cells in session order
    pt = point_estimates(col, X[present], Y[present], X.shape[1], alpha)
    FX, FY, exact = flip_sums(X, Y, resamples, seed)
    draws = bootstrap.draw(X, Y, pt.estimate, resamples, seed)
    K = X.shape[1]
    est = Estimates(
        pt.estimate,
        pt.se,
        np.full((K, 2), np.nan),
        np.full((K, 2), np.nan),
        pt.n_sessions,
        pt.differing,
        X,
        Y,
        FX,
        FY,
        exact,
        draws,
        method,
    )
    if interval:
        est.ci = bootstrap.interval(method, draws, pt.estimate, pt.se, alpha)
        est.ci_sign_flip = randomization_interval(est, alpha)
    return est


def _p_of_count(count, B: int, exact) -> np.ndarray:
    """The p-value of ``count`` draws at least as extreme: #/B on a balanced set, (1 + #)/(1 + B) on a random one."""
    return np.where(exact, count / max(B, 1), (1 + count) / (1 + B))


def randomization_interval(est: Estimates, alpha: float) -> np.ndarray:
    """[lo, hi]: the thresholds δ that the one-sided sign-flip tests at α do not reject.

    The "greater" test at δ does not reject exactly when at least c of the B draws have
    r_b = FX_b / FY_b ≤ δ, c the smallest count whose p-value (:func:`_p_of_count`, the one
    :func:`p_value` uses) is ≥ α; so its bound is the c-th smallest r (and likewise above).
    A draw that swaps no present session (FY = 0) ties with the observed value at every δ.
    """
    B, K = est.FX.shape
    with np.errstate(invalid="ignore", divide="ignore"):
        r = est.FX / est.FY
    none = est.FY <= 0
    counts = np.arange(B + 1)
    need = np.array([int(np.argmax(_p_of_count(counts, B, e) >= alpha)) for e in (False, True)])[
        est.exact.astype(int)
    ]
    if B:
        low = np.sort(np.where(none, -np.inf, r), axis=0)
        high = np.sort(np.where(none, np.inf, r), axis=0)[::-1]
        cols = np.arange(K)
        lo = np.where(need > 0, low[np.maximum(need - 1, 0), cols], -np.inf)
        hi = np.where(need > 0, high[np.maximum(need - 1, 0), cols], np.inf)
    else:
        lo = hi = np.full(K, np.nan)
    ci = np.stack([lo, hi], axis=1)
    ci = np.where(np.isfinite(ci), ci, np.nan)
    return np.where((est.n_sessions > 0)[:, None], ci, np.nan)


def sign_flip_p(est: Estimates, threshold: np.ndarray | float, side: str) -> np.ndarray:
    """One-sided sign-flip p-values per column alone: H0 θ ≤ δ (``side="greater"``) or θ ≥ δ (``"less"``).

    With z_g = X_g − δ·Y_g and T = Σ z_g, a sign vector gives T_s = T − 2·(FX − δ·FY). On a balanced
    reference set (:func:`flip_sums`) p = #{T_s beyond T} / B, exact where at most :data:`EXACT_MAX`
    sessions are present (any δ) or differ from zero (δ = 0); on a random one (1 + #) / (1 + B);
    where no draw is as extreme, the smaller of 1/(1+B) and Hoeffding's bound.
    """
    if side not in ("greater", "less"):
        raise ValueError(f"side must be 'greater' or 'less', not {side!r}")
    K = est.X.shape[1]
    d = np.broadcast_to(np.asarray(threshold, dtype=float), (K,))
    sgn = 1.0 if side == "greater" else -1.0
    Z = np.where(est.Y > 0, est.X - d * est.Y, 0.0) * sgn  # oriented so that large T is evidence
    T = Z.sum(axis=0)
    tol = 1e-9 * (np.abs(Z).sum(axis=0) + 1e-300)
    B = est.FX.shape[0]
    # T_s − T = −2·sgn·(FX − δ·FY): the draw is at least as extreme as the observation when ≥ −tol.
    beyond = (-2 * sgn * (est.FX - d * est.FY) >= -tol).sum(axis=0)
    p = _p_of_count(beyond, B, est.exact)
    with np.errstate(invalid="ignore", divide="ignore"):
        hoeff = np.where(T > 0, np.exp(-(T**2) / (2 * (Z**2).sum(axis=0))), 1.0)
    # No draw as extreme (a random set, or a balanced one whose other sessions are random, at δ ≠ 0).
    p = np.where(beyond == 0, np.minimum(1 / (1 + B), hoeff), p)
    return np.where(est.n_sessions > 0, np.clip(p, 0.0, 1.0), np.nan)


def interval_p(est: Estimates, threshold: np.ndarray | float, side: str) -> np.ndarray:
    """The decision interval's own one-sided test from the same session resamples: p < α exactly
    when ``ci`` lies beyond δ on ``side`` (:mod:`evalkit.decide.bootstrap`); with fewer than 2
    sessions there is no interval and it does not bind (0)."""
    return bootstrap.p_value(est.method, est.draws, est.estimate, est.se, threshold, side)


def p_value(est: Estimates, threshold: np.ndarray | float, side: str) -> np.ndarray:
    """The decision's one-sided p-values per column: H0 θ ≤ δ (``side="greater"``) or θ ≥ δ (``"less"``).

    The larger of the bootstrap interval's own test (:func:`interval_p`) and the sign-flip test
    (:func:`sign_flip_p`): a significant result always has its interval beyond the threshold, and
    where only a handful of sessions differ the exact sign-flip test keeps the error rate (the
    bootstrap cannot know that 4 of 200 sessions all in one direction happen 1 time in 16).
    """
    p = sign_flip_p(est, threshold, side)
    return np.where(est.n_sessions > 0, np.maximum(p, interval_p(est, threshold, side)), np.nan)


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
