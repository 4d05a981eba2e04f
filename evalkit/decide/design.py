"""Design numbers of the decide stage's test: MDE, achieved power and sessions needed.

They use the test's own critical value on the t scale (:func:`t_critical`) and its own null (the
min effect or the margin), so "power 0.8 at the MDE" is a statement about this test; and a
median-unbiased SE (:func:`design_se`), so that the MDE a typical run reports keeps that promise.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from evalkit.decide.stats import Estimates, _scale_floor

# Fewest sessions the design numbers consider: t* (see t_critical) is finite from 7 on at α = 0.025.
MIN_N = 8


def t_critical(n_sessions, alpha: float) -> np.ndarray:
    """The sign-flip test's critical value on the t scale (the one design numbers use).

    The test compares T = Σz with √Σz² · c, c the 1 − α quantile of its randomization
    distribution; since Σz² = (n−1)s² + n·z̄², that is the one-sample t statistic against
    t* = c·√((n−1)/(n − c²)). With few sessions the randomization distribution is discrete and its
    quantile lies above z_{1−α}, so c = t_{1−α, n−1} (a conservative stand-in). t* is 3.07 at
    n = 10, 2.31 at n = 20 and 1.99 at n = 200; it is above t_{1−α, n−1}, so the printed t
    interval's own test (also required) never needs more.
    """
    n = np.asarray(n_sessions, dtype=float)
    c = sps.t.ppf(1 - alpha, np.maximum(n - 1, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > c**2 + 1e-9, c * np.sqrt(np.maximum(n - 1, 0) / (n - c**2)), np.inf)


def design_se(est: Estimates) -> np.ndarray:
    """Per column, the SE to plan with: the run's SE made median-unbiased, SE · √(ν / χ²_{0.5, ν}).

    A run's SE is a noisy estimate of σ/√n with a right-skewed distribution: at the median run it
    is below σ/√n (4.4% for a 0/1 metric at n = 20, where sessions of 1–8 events make the
    differences heavy-tailed), so an MDE computed from it gives less than the promised power in
    more than half of the runs (Browne 1995, "On the use of a pilot sample for sample size
    determination"). s² is taken as σ²·χ²_ν/ν with ν = 2·s⁴ / Var(s²) (Satterthwaite 1946),
    Var(s²) the delete-one jackknife's over sessions (Efron & Stein 1981; power sums, O(G·K)),
    capped at n − 1 (normal data). Columns with fewer than 4 sessions or no spread keep their SE.
    """
    present = est.Y > 0
    n = present.sum(axis=0).astype(float)
    u = np.where(present, est.X - np.nan_to_num(est.estimate) * est.Y, 0.0)
    s1, s2 = u.sum(axis=0), (u**2).sum(axis=0)

    def variance(m, a, b):  # sample variance (n − 1 denominator) from the power sums
        return (b - a**2 / m) / np.maximum(m - 1, 1)

    with np.errstate(invalid="ignore", divide="ignore"):
        var = variance(n, s1, s2)
        loo = np.where(present, variance(n - 1, s1 - u, s2 - u**2), 0.0)  # session g left out
        dev = np.where(present, loo - loo.sum(axis=0) / np.maximum(n, 1), 0.0)
        var_jk = (n - 1) / np.maximum(n, 1) * (dev**2).sum(axis=0)
        nu = np.clip(2 * var**2 / var_jk, 1.0, np.maximum(n - 1, 1))
        scale = np.sqrt(nu / sps.chi2.ppf(0.5, nu))
    ok = (n >= 4) & (var > _scale_floor(u, present) ** 2) & np.isfinite(scale)
    return est.se * np.where(ok, scale, 1.0)


def critical(n_sessions, alpha: float, bootstrap_t=None) -> np.ndarray:
    """The decision's critical value on the t scale: the sign-flip test's t*, or the bootstrap-t's
    own upper critical value (:func:`evalkit.decide.bootstrap.critical`) where that is larger (a
    skewed metric), since a ship needs both."""
    t = t_critical(n_sessions, alpha)
    if bootstrap_t is None:
        return t
    # Unbounded (no spread at all, or a handful of differing sessions): the bootstrap has no
    # critical value to plan with, and an MDE of "never" helps no one; t* it is (fmax skips NaN).
    b = np.asarray(bootstrap_t, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.fmax(t, np.where(np.isfinite(b), b, np.nan))


def _k(n_sessions, alpha: float, power: float, bootstrap_t=None) -> np.ndarray:
    n = np.asarray(n_sessions, dtype=float)
    return critical(n, alpha, bootstrap_t) + sps.t.ppf(power, np.maximum(n - 1, 1))


def mde(se, n_sessions, alpha: float, power: float, threshold=0.0, bootstrap_t=None) -> np.ndarray:
    """The true effect (oriented: better is positive) at which the test against ``threshold`` has ``power``.

    For a success metric the threshold is the min effect, so MDE = min effect + (c + t_power)·SE
    (``se``: :func:`design_se` in the decide stage; c: :func:`critical`); for a guardrail it is −margin.
    """
    # Too few sessions for any test (t* = inf) and no spread (SE = 0) give NaN: no MDE exists.
    with np.errstate(invalid="ignore"):
        k = _k(n_sessions, alpha, power, bootstrap_t)
        return np.asarray(threshold, dtype=float) + k * np.asarray(se, dtype=float)


def achieved_power(effect, se, n_sessions, alpha: float, threshold=0.0, bootstrap_t=None) -> np.ndarray:
    """Power of the test against ``threshold`` when the true (oriented) effect is ``effect``."""
    n = np.asarray(n_sessions, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = (np.asarray(effect, dtype=float) - threshold) / np.asarray(se, dtype=float)
        return sps.t.sf(critical(n, alpha, bootstrap_t) - lam, np.maximum(n - 1, 1))


def sessions_needed(effect, se, n_sessions, alpha: float, power: float, threshold=0.0) -> np.ndarray:
    """Sessions for ``power`` at the true (oriented) ``effect``: n = (t* + t_power)²·ω²/(effect − threshold)².

    ω² = G·SE² is the variance of per-session differences; the quantiles depend on n, so the
    equation is solved by a few fixed-point steps from the normal answer.
    """
    omega2 = np.asarray(n_sessions, dtype=float) * np.asarray(se, dtype=float) ** 2
    gap = np.asarray(effect, dtype=float) - threshold
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.where(gap > 0, gap, np.nan)
        z = sps.norm.ppf(1 - alpha) + sps.norm.ppf(power)
        n = np.maximum(np.ceil(z**2 * omega2 / gap**2), MIN_N)
        for _ in range(6):
            n = np.maximum(np.ceil(_k(n, alpha, power) ** 2 * omega2 / gap**2), MIN_N)
    return n
