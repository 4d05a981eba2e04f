"""Design numbers of the decide stage's test: MDE, achieved power and sessions needed.

They use the test's own critical value on the t scale (:func:`t_critical`, and against a non-zero
threshold the skewness-corrected t test's, :func:`design_critical`) and its own null (the min
effect or the margin), so "power 0.8 at the MDE" is a statement about this test. What they take
from a run (:func:`design_inputs`): a median-unbiased SE and the skewness of the session residuals.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    quantile lies above z_{1−α}, so c = t_{1−α, n−1} (a conservative stand-in: at n = 10 the
    simulation's power at the MDE is 85–95% rather than 80%; at n = 200 it is 80%). t* is 3.07 at
    n = 10, 2.31 at n = 20 and 1.99 at n = 200.
    """
    n = np.asarray(n_sessions, dtype=float)
    c = sps.t.ppf(1 - alpha, np.maximum(n - 1, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > c**2 + 1e-9, c * np.sqrt(np.maximum(n - 1, 0) / (n - c**2)), np.inf)


@dataclass
class Design:
    """What the design numbers (:func:`mde`, :func:`achieved_power`, :func:`sessions_needed`) take from a run."""

    se: np.ndarray  # the SE, median-unbiased: SE · √(ν / χ²_{0.5, ν})
    skew: tuple[np.ndarray, np.ndarray]  # (γ̂, SE(γ̂)) of the session residuals


def design_inputs(est: Estimates) -> Design:
    """Per column: the SE to plan with and the skewness (γ̂, its jackknife SE) of the session residuals.

    *Skewness.* Shifting by a threshold does not change γ̂ (for the mean of session means z_g = X_g − δ
    is a shift of X_g), so it is the γ̂ the skewness-corrected t test (:func:`skew_t_p`) sees at any
    threshold. Its sampling spread is large (sd 0.9 at n = 20 for a 0/1 metric, twice the
    normal-theory value), so the design numbers average over it (:func:`_expected_power`).

    *SE.* A run's SE is a noisy estimate whose distribution is skewed: at the median run it is
    below σ/√n (4.4% for a 0/1 metric at n = 20, where sessions of 1–8 events make the
    differences heavy-tailed), so an MDE computed from it has less than the promised power half the
    time and more (Browne 1995, "On the use of a pilot sample for sample size determination").
    The SE is therefore taken as s²·χ²_ν/ν with ν = 2·s⁴ / Var(s²) (Satterthwaite 1946),
    Var(s²) the jackknife's, at most n − 1 (normal data), and made median-unbiased:
    SE · √(ν / χ²_{0.5, ν}).

    Both from the delete-one jackknife (Efron & Stein 1981) over sessions, by power sums: O(G·K).
    """
    present = est.Y > 0
    n = present.sum(axis=0).astype(float)
    u = np.where(present, est.X - np.nan_to_num(est.estimate) * est.Y, 0.0)

    def moments(s0, s1, s2, s3):
        m = s1 / s0
        m2 = s2 / s0 - m**2
        m3 = s3 / s0 - 3 * m * s2 / s0 + 2 * m**3
        return m3 / np.maximum(m2, 1e-300) ** 1.5, m2 * s0 / np.maximum(s0 - 1, 1)

    def jackknife(loo):
        loo = np.where(present, loo, np.nan)
        dev = np.where(present, loo - np.nansum(loo, axis=0) / np.maximum(n, 1), 0.0)
        return np.sqrt((n - 1) / np.maximum(n, 1) * (dev**2).sum(axis=0))

    S = [n, u.sum(axis=0), (u**2).sum(axis=0), (u**3).sum(axis=0)]
    with np.errstate(invalid="ignore", divide="ignore"):
        gamma, var = moments(*S)
        g_loo, v_loo = moments(n - 1, S[1] - u, S[2] - u**2, S[3] - u**3)  # (G × K): session g left out
        gse, vse = jackknife(g_loo), jackknife(v_loo)
        nu = np.clip(2 * var**2 / vse**2, 1.0, np.maximum(n - 1, 1))
        scale = np.sqrt(nu / sps.chi2.ppf(0.5, nu))
    ok = (n >= 4) & (var > _scale_floor(u, present) ** 2) & np.isfinite(gamma) & np.isfinite(gse)
    scale = np.where(ok & np.isfinite(scale), scale, 1.0)
    return Design(est.se * scale, (np.where(ok, gamma, 0.0), np.where(ok, gse, 0.0)))


def design_critical(n_sessions, alpha: float, gamma=0.0, threshold=0.0) -> np.ndarray:
    """The critical value on the t scale of the whole test against ``threshold`` at skewness ``gamma``.

    At a zero threshold that is the sign-flip test's :func:`t_critical`. Against a non-zero one the
    test also needs the skewness-corrected t test, which rejects when min(t, g(t)) > t_{1−α, n−1};
    Hall's g(t) = t + a + b·t² + b²t³/3 (a = γ/(6√n), b = γ/(3√n)) is increasing, with inverse
    g⁻¹(y) = (∛(1 + 3b(y − a)) − 1)/b, so the t statistic must exceed max(t*, g⁻¹(t_{1−α, n−1})),
    which is above t* where the sample is left-skewed (γ̂ < 0).
    """
    n = np.asarray(n_sessions, dtype=float)
    gamma = np.where(np.asarray(threshold, dtype=float) != 0, np.asarray(gamma, dtype=float), 0.0)
    c = sps.t.ppf(1 - alpha, np.maximum(n - 1, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        a, b = gamma / (6 * np.sqrt(n)), gamma / (3 * np.sqrt(n))
        inv = np.where(np.abs(b) > 1e-12, (np.cbrt(1 + 3 * b * (c - a)) - 1) / np.where(b != 0, b, 1), c - a)
    return np.maximum(t_critical(n, alpha), np.where(n >= 3, inv, -np.inf))


# Gauss–Hermite nodes and weights for an expectation over a normal γ̂ (probabilists' form).
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(11)
_GH_W = _GH_W / _GH_W.sum()


def _expected_power(lam, n, alpha: float, threshold, skew) -> np.ndarray:
    """Power at noncentrality ``lam`` (effect − threshold in SEs), averaged over the γ̂ the test will see.

    Without ``skew`` the skewness correction is left out (the sign-flip test's t* alone). With
    ``skew = (γ̂, SE(γ̂))`` at ``n`` sessions the test's γ̂ is taken as normal around γ̂ with that SE:
    the correction only ever lowers the evidence (min(t, g(t))), so its cost is the average over
    the samples where γ̂ < 0, not the cost at the run's own γ̂ (which is near 0 for a symmetric metric).
    """
    df = np.maximum(n - 1, 1)
    if skew is None:
        return sps.t.sf(t_critical(n, alpha) - lam, df)
    gamma, gse = skew
    crit = design_critical(n, alpha, gamma + _GH_X[:, None] * np.atleast_1d(gse), threshold)
    return (_GH_W[:, None] * sps.t.sf(crit - lam, df)).sum(axis=0)


def _k(n_sessions, alpha: float, power: float, threshold=0.0, skew=None) -> np.ndarray:
    """The noncentrality (effect − threshold)/SE at which the test has ``power``: t* + t_power without
    ``skew``; with it, the root of :func:`_expected_power` (bisection between the nodes' extremes)."""
    n = np.asarray(n_sessions, dtype=float)
    tp = sps.t.ppf(power, np.maximum(n - 1, 1))
    if skew is None:
        return t_critical(n, alpha) + tp
    gamma, gse = (np.asarray(v, dtype=float) for v in skew)
    n, gamma, gse, thr, tp = np.broadcast_arrays(n, gamma, gse, np.asarray(threshold, dtype=float), tp)
    crit = design_critical(n, alpha, gamma + _GH_X[:, None] * gse, thr)
    lo, hi = crit.min(axis=0) + tp, crit.max(axis=0) + tp
    ok = np.isfinite(hi)
    lo, hi = np.where(ok, lo, 0.0), np.where(ok, hi, 0.0)
    for _ in range(40):
        mid = (lo + hi) / 2
        below = _expected_power(mid, n, alpha, thr, (gamma, gse)) < power
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.where(ok, (lo + hi) / 2, np.inf)


def mde(se, n_sessions, alpha: float, power: float, threshold=0.0, skew=None) -> np.ndarray:
    """The true effect (oriented: better is positive) at which the test against ``threshold`` has ``power``.

    For a success metric the threshold is the min effect, so MDE = min effect + k·SE, k = t* + t_power
    for the sign-flip test alone; ``skew`` = (γ̂, SE(γ̂)) of :func:`skewness` (oriented) adds the
    skewness-corrected t test the decision also needs against a non-zero threshold (:func:`_k`).
    For a guardrail the threshold is −margin.
    """
    # Too few sessions for any test (t* = inf) and no spread (SE = 0) give NaN: no MDE exists.
    with np.errstate(invalid="ignore"):
        k = _k(n_sessions, alpha, power, threshold, skew)
        return np.asarray(threshold, dtype=float) + k * np.asarray(se, dtype=float)


def achieved_power(effect, se, n_sessions, alpha: float, threshold=0.0, skew=None) -> np.ndarray:
    """Power of the test against ``threshold`` when the true (oriented) effect is ``effect`` (``skew``: see :func:`mde`)."""
    n = np.asarray(n_sessions, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = (np.asarray(effect, dtype=float) - threshold) / np.asarray(se, dtype=float)
        return _expected_power(lam, n, alpha, threshold, skew)


def sessions_needed(
    effect, se, n_sessions, alpha: float, power: float, threshold=0.0, skew=None
) -> np.ndarray:
    """Sessions for ``power`` at the true (oriented) ``effect``: n = k(n)²·ω²/(effect − threshold)² (:func:`_k`).

    ω² = G·SE² is the variance of per-session differences; the quantiles, and with ``skew`` the
    skewness correction and γ̂'s SE (both shrink as 1/√n), depend on n, so the equation is solved by
    a few fixed-point steps from the normal answer.
    """
    n0 = np.asarray(n_sessions, dtype=float)
    omega2 = n0 * np.asarray(se, dtype=float) ** 2
    gap = np.asarray(effect, dtype=float) - threshold
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = np.where(gap > 0, gap, np.nan)
        z = sps.norm.ppf(1 - alpha) + sps.norm.ppf(power)
        n = np.maximum(np.ceil(z**2 * omega2 / gap**2), MIN_N)
        for _ in range(6):
            sk = (
                None
                if skew is None
                else (skew[0], np.asarray(skew[1]) * np.sqrt(n0 / np.where(np.isfinite(n), n, 1)))
            )
            n = np.maximum(np.ceil(_k(n, alpha, power, threshold, sk) ** 2 * omega2 / gap**2), MIN_N)
    return n
