"""The session-cluster bootstrap: the decision interval and its own test (REFERENCES.md §3).

The session is the resampling unit: a resample draws G sessions with replacement and each keeps
all its events, so a resample is a row of multinomial counts w (how often each session was drawn).
One (B × G) matrix of counts is drawn per decision and shared by every comparison; the resampled
sums of a column are then matrix products W·X, as the sign-flip test's are.

Per resample b and column k (θ̂ = ΣX/ΣY, residuals u = X − θ̂·Y, zero where a session is absent):

- θ*_b = θ̂ + (W·u)/(W·Y), the resampled ratio of means;
- SE*_b, the same linearised clustered SE the rule uses, from W·u, W·u², W·(uY), W·Y² and the
  sessions drawn n*_b = W·1[present] (SE² = n/(n−1)·Σ(X − θY)²/(ΣY)²);
- T*_b = (θ*_b − θ̂)/SE*_b, the studentized statistic (Hall 1988; Efron & Tibshirani 1993, ch. 12).

Intervals at level 1 − 2α, each with its own one-sided test read off the same draws, so the
interval lies beyond δ exactly when that test rejects at α (p = (1 + #)/(1 + B), Phipson & Smyth
2010; the bounds are the order statistics that count rule implies):

- ``bootstrap-t`` (the default): [θ̂ − c_hi·SE, θ̂ − c_lo·SE], c the (m + 1)-th largest and smallest
  T*, m the most draws beyond a bound a rejection allows; p against δ counts T* ≥ (θ̂ − δ)/SE.
- ``percentile``: the order statistics of θ*; p counts θ* ≤ δ.
- ``bca``: the percentile levels moved by the bias correction z0 and the jackknife acceleration a
  (Efron 1987); p is the level at which δ is the bound.

Degenerate resamples are kept and counted against the decision, never dropped (dropping them
would condition on the lucky resamples):

- a resample whose SE* is 0 (every session it drew has the same difference) has T* = ±∞ when
  θ* ≠ θ̂: the studentized statistic of such data is unbounded, and so may the interval be;
- T* is undefined (θ* = θ̂ with SE* = 0, fewer than 2 sessions drawn, or none of the column's
  sessions drawn): it counts as beyond the bound in both tails, the conservative reading;
- so with a 0/1 metric where k of G sessions differ, a resample draws none of them with
  probability ≈ e^−k; at k ≤ 3 that is more than α of the resamples, and the interval is
  unbounded on the side away from 0 (decision.json: null; the reason: ∞). The exact sign-flip
  test is what decides such comparisons (:mod:`evalkit.decide.stats`).
- a column whose observed SE is 0 (every session has the same difference) has every resample
  equal to the data: its interval is the point θ̂, beyond δ exactly when θ̂ is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import special
from scipy import stats as sps

METHODS = ("bootstrap-t", "percentile", "bca")
NAMES = {"bootstrap-t": "bootstrap-t", "percentile": "percentile", "bca": "BCa"}
# Resamples per chunk: bounds memory at ~chunk·G·8 bytes for the counts.
CHUNK = 1000


def label(method: str, level: float, resamples: int, seed: int) -> str:
    """The interval's name as every output prints it: "95% session bootstrap-t, 10000 resamples, seed S"."""
    return f"{100 * level:g}% session {NAMES[method]}, {resamples} resamples, seed {seed}"


def session_weights(rng: np.random.Generator, G: int, b: int) -> np.ndarray:
    """(b × G) counts: how often each of G sessions is drawn in each of b resamples of G sessions."""
    idx = rng.integers(0, G, size=(b, G)) + (np.arange(b) * G)[:, None]
    return np.bincount(idx.ravel(), minlength=b * G).reshape(b, G).astype(float)


@dataclass
class Draws:
    """The bootstrap distribution of every column (B × K), oriented like its estimate."""

    T: np.ndarray  # studentized θ*: ±inf where SE* = 0, NaN where undefined (both tails)
    theta: np.ndarray  # θ*: NaN where the resample drew none of the column's sessions
    accel: np.ndarray  # (K,) BCa acceleration from the delete-one-session jackknife
    n: np.ndarray  # (K,) sessions present: Student's t on n − 1 df floors the bootstrap-t's critical values

    def oriented(self, sign: np.ndarray) -> Draws:
        s = np.asarray(sign, dtype=float)
        return replace(self, T=self.T * s, theta=self.theta * s, accel=self.accel * s)


def _unique_columns(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct columns, index of each column's distinct one): products with repeated columns once."""
    u, of = np.unique(A, axis=1, return_inverse=True)
    return u, np.asarray(of).ravel()


def jackknife_accel(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """BCa's acceleration a = Σd³ / (6·(Σd²)^1.5), d the delete-one-session estimates' deviations."""
    present = Y > 0
    sx, sy = X.sum(axis=0), Y.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        loo = np.where(present, (sx - X) / (sy - Y), np.nan)
        n = present.sum(axis=0)
        d = np.where(present, np.nansum(loo, axis=0) / np.maximum(n, 1) - loo, 0.0)
        a = (d**3).sum(axis=0) / (6 * ((d**2).sum(axis=0)) ** 1.5)
    return np.where(np.isfinite(a), a, 0.0)


def draw(X: np.ndarray, Y: np.ndarray, theta: np.ndarray, resamples: int, seed: int) -> Draws:
    """θ* and T* of every column of (X, Y) over ``resamples`` shared session resamples."""
    G, K = X.shape
    B = resamples
    T, TH = np.full((B, K), np.nan), np.full((B, K), np.nan)
    if G == 0 or K == 0:
        return Draws(T, TH, np.zeros(K), np.zeros(K))
    present = Y > 0
    U = np.where(present, X - np.nan_to_num(theta) * Y, 0.0)
    U2 = U**2
    # The mean of session means has Y = 1[present]: Y² = Y, u·Y = u and n* = W·Y, three products fewer.
    indicator = bool(np.all((Y == 0) | (Y == 1)))
    Yu, y_of = _unique_columns(Y)
    if not indicator:
        UY = U * Y
        Pu, p_of = _unique_columns(present.astype(float))
    largest = np.abs(np.where(present, X, 0.0)).max(axis=0, initial=0.0)
    rng = np.random.default_rng([seed, 1])  # a stream of its own beside the sign-flip test's
    for start in range(0, B, CHUNK):
        b = min(CHUNK, B - start)
        W = session_weights(rng, G, b)
        wy = (W @ Yu)[:, y_of]
        wu, wu2 = W @ U, W @ U2
        if indicator:
            wuy, wy2, nstar = wu, wy, wy
        else:
            wuy, wy2, nstar = W @ UY, (W @ Yu**2)[:, y_of], (W @ Pu)[:, p_of]
        with np.errstate(invalid="ignore", divide="ignore"):
            d = wu / wy  # θ* − θ̂; NaN where the resample drew none of the column's sessions
            if indicator:  # Σ w (X − θ*Y)² = Σwu² − d·Σwu when Y is 0/1
                spread, scale = wu2 - d * wu, wu2
            else:
                spread = wu2 - 2 * d * wuy + d**2 * wy2
                scale = wu2 + np.abs(2 * d * wuy) + d**2 * wy2
            # Cancellation leaves residue of S's own terms; below it (or below the rule's own SE
            # floor, relative to the metric's magnitude) the resample has no spread.
            flat = spread <= 1e-10 * scale + (1e-12 * largest) ** 2 * nstar
            same = np.abs(wu) <= 1e-9 * np.sqrt(nstar * wu2)  # θ* = θ̂ up to rounding
            t = d / (np.sqrt(nstar / (nstar - 1) * np.maximum(spread, 0.0)) / wy)
            t[flat] = np.copysign(np.inf, d[flat])
            t[flat & same] = np.nan
            t[nstar < 2] = np.nan
            d[same & (wy > 0)] = 0.0
        T[start : start + b] = t
        TH[start : start + b] = np.nan_to_num(theta) + d
    return Draws(T, TH, jackknife_accel(X, Y), present.sum(axis=0))


def critical(draws: Draws, alpha: float) -> np.ndarray:
    """The bootstrap-t's upper critical value per column: the (m + 1)-th largest T* (undefined draws
    count as +∞), never below Student's t_{1−α, n−1}.

    The floor is a small-sample correction. With 20–40 sessions the T* quantiles follow the sample's
    own skewness, which for a symmetric metric is noise: the equal-tailed bootstrap-t then covered a
    true difference of 0 in only 88.8–94.5% of A/A experiments (docs/rules.md), where Student's t on
    G − 1 df covered 95–97%. With the floor the bootstrap-t can widen the interval on a skewed side
    but not narrow it below the clustered t interval; as n grows the two agree."""
    B, K = draws.T.shape
    m = most_beyond(alpha, B)
    floor = sps.t.ppf(1 - alpha, np.maximum(draws.n - 1, 1))
    if m < 0:
        return np.full(K, np.inf)
    hi_t = np.where(np.isnan(draws.T), np.inf, draws.T)
    return np.maximum(np.partition(hi_t, B - 1 - m, axis=0)[B - 1 - m], floor)


def most_beyond(alpha: float, B: int) -> int:
    """m: the most draws beyond the observation a rejection allows, (1 + m)/(1 + B) < α (−1: none)."""
    m = int(np.ceil(alpha * (1 + B))) - 2
    while (2 + m) / (1 + B) < alpha:
        m += 1
    while m >= 0 and (1 + m) / (1 + B) >= alpha:
        m -= 1
    return m


def _p_of_count(count, B: int) -> np.ndarray:
    return (1 + np.asarray(count, dtype=float)) / (1 + B)


def _bca_shape(draws: Draws, estimate: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray]:
    """(z0, a): BCa's bias correction from the share of θ* below θ̂ (ties count half), and the
    jackknife acceleration."""
    th = draws.theta
    valid = np.isfinite(th).sum(axis=0)
    below = (th < estimate).sum(axis=0) + 0.5 * (th == estimate).sum(axis=0)
    share = np.clip(below / np.maximum(valid, 1), 0.5 / max(B, 1), 1 - 0.5 / max(B, 1))
    return special.ndtri(share), draws.accel


def _bca_p(count, z0, a, B: int) -> np.ndarray:
    """BCa's p of H0 θ ≤ δ when ``count`` of the B draws θ* are at or below δ.

    With Ĝ = (1 + c)/(1 + B) (the percentile test's p), v = Φ⁻¹(Ĝ) − z0, p = Φ(v/(1 + a·v) − z0):
    the level at which δ is BCa's lower bound (Efron 1987); at a = z0 = 0 the percentile test.
    Where 1 + a·v ≤ 0 the map has left its range and p takes its limit (0 below the centre, 1
    above), so p never falls as the count grows; every draw at or below δ is no evidence (1)."""
    count = np.asarray(count)
    v = special.ndtri(_p_of_count(count, B)) - z0
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = 1 + a * v
        p = np.where(denom > 0, special.ndtr(v / denom - z0), np.where(v < 0, 0.0, 1.0))
    return np.where(count >= B, 1.0, p)


def _bca_rejecting(z0, a, B: int, alpha: float) -> np.ndarray:
    """j: the counts 0…j − 1 are those :func:`_bca_p` rejects at α (the bound is the j-th smallest θ*).

    Solved in closed form (the BCa level α₁ = Φ(z0 + q/(1 − a·q)), q = z0 + z_α), then checked
    against :func:`_bca_p` itself so rounding cannot set the bound and the test apart."""
    q = z0 + special.ndtri(alpha)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.where(1 - a * q > 0, q / (1 - a * q), np.where(a > 0, np.inf, -np.inf))
        j = np.ceil(special.ndtr(v + z0) * (1 + B) - 1)
    j = np.clip(np.nan_to_num(j, nan=0.0), 0, B).astype(np.int64)
    for _ in range(2):
        j = np.where((j > 0) & (_bca_p(j - 1, z0, a, B) >= alpha), j - 1, j)
        j = np.where((j < B) & (_bca_p(j, z0, a, B) < alpha), j + 1, j)
    return j


def _sorted(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """θ* sorted per column (NaN last), the number of NaN, and False (NaN are not first): the
    undefined draws count beyond either bound."""
    return np.sort(theta, axis=0), np.isnan(theta).sum(axis=0), False


def _kth_smallest(order: tuple, k) -> np.ndarray:
    """The k-th smallest (0-based) θ* with NaN read as −∞ (beyond the lower bound), from an order
    :func:`_sorted` made (NaN last), or its reversal negated (NaN first)."""
    s, nan, nan_first = order
    k = np.broadcast_to(np.asarray(k), nan.shape)
    at = k if nan_first else k - nan
    return np.where(k < nan, -np.inf, s[np.clip(at, 0, s.shape[0] - 1), np.arange(s.shape[1])])


def p_greater(method: str, draws: Draws, estimate, se, threshold) -> np.ndarray:
    """One-sided p of H0 θ ≤ δ from the draws, dual to :func:`lower_bound`: p < α ⟺ bound > δ."""
    B, K = draws.T.shape
    d = np.broadcast_to(np.asarray(threshold, dtype=float), (K,))
    if method == "bootstrap-t":
        with np.errstate(invalid="ignore", divide="ignore"):
            t_obs = (estimate - d) / se
        tstar = draws.T
        beyond = ((tstar >= t_obs) | np.isnan(tstar)).sum(axis=0)
        p = np.maximum(_p_of_count(beyond, B), sps.t.sf(t_obs, np.maximum(draws.n - 1, 1)))
        return np.where(se == 0, np.where(estimate > d, 0.0, 1.0), p)
    below = ((draws.theta <= d) | np.isnan(draws.theta)).sum(axis=0)
    if method == "percentile":
        return _p_of_count(below, B)
    if method == "bca":
        return _bca_p(below, *_bca_shape(draws, estimate, B), B)
    raise ValueError(f"unknown interval {method!r} (known: {', '.join(METHODS)})")


def lower_bound(method: str, draws: Draws, estimate, se, alpha: float, order=None) -> np.ndarray:
    """The interval's lower bound: the least δ that :func:`p_greater` does not reject at α.

    ``order``: :func:`_sorted` of ``draws.theta`` when the caller has it (percentile, BCa)."""
    B, K = draws.T.shape
    m = most_beyond(alpha, B)
    if method == "bootstrap-t":
        with np.errstate(invalid="ignore"):
            lo = estimate - critical(draws, alpha) * se
        return np.where(se == 0, estimate, lo)
    order = order if order is not None else _sorted(draws.theta)
    if method == "percentile":
        return _kth_smallest(order, m) if m >= 0 else np.full(K, -np.inf)
    if method == "bca":
        j = _bca_rejecting(*_bca_shape(draws, estimate, B), B, alpha)
        return np.where(j > 0, _kth_smallest(order, np.maximum(j - 1, 0)), -np.inf)
    raise ValueError(f"unknown interval {method!r} (known: {', '.join(METHODS)})")


def interval(method: str, draws: Draws, estimate, se, alpha: float) -> np.ndarray:
    """(K, 2) two-sided interval at 1 − 2α: the lower bound of the data and of the data negated."""
    neg = draws.oriented(-np.ones_like(estimate))
    up = down = None
    if method != "bootstrap-t":  # one sort serves both bounds: the negated draws are it reversed
        s, nan, _ = _sorted(draws.theta)
        up, down = (s, nan, False), (-s[::-1], nan, True)
    lo = lower_bound(method, draws, estimate, se, alpha, up)
    hi = -lower_bound(method, neg, -estimate, se, alpha, down)
    ci = np.stack([lo, hi], axis=1)
    return np.where(np.isfinite(se)[:, None], ci, np.nan)


def p_value(method: str, draws: Draws, estimate, se, threshold, side: str) -> np.ndarray:
    """The interval's own one-sided test: H0 θ ≤ δ (``greater``) or θ ≥ δ (``less``)."""
    if side == "greater":
        p = p_greater(method, draws, estimate, se, threshold)
    elif side == "less":
        neg = draws.oriented(-np.ones_like(estimate))
        p = p_greater(method, neg, -estimate, se, -np.asarray(threshold, dtype=float))
    else:
        raise ValueError(f"side must be 'greater' or 'less', not {side!r}")
    return np.where(np.isfinite(se), p, 0.0)  # fewer than 2 sessions: no interval, it does not bind
