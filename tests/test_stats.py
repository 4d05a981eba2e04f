"""Statistics: calibration under clustered null data, agreement with scipy, and the building blocks.

The practice followed is REFERENCES.md §3: the session is the resampling unit; with 40 sessions a
session-level bootstrap keeps the false-positive rate near nominal where an event-level one does not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from evalkit import stats
from evalkit.metrics import COLUMNS, normalize

N_EXP, G, B = 400, 40, 2000


def simulate(seed: int, effect: float = 0.0, experiments: int = N_EXP, sessions: int = G):
    """Per-session sums of event differences for many experiments at once (one column each).

    Differences d = effect + u_session + e_event with var(u) = var(e) = 1, so the intra-session
    correlation is 0.5; 1–8 events per session.
    """
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 9, size=(sessions, experiments))
    u = rng.normal(size=(sessions, experiments))
    e = rng.normal(size=(sessions, experiments, 8))
    mask = np.arange(8)[None, None, :] < n[..., None]
    sums = (effect + u) * n + (e * mask).sum(axis=2)
    return sums, n.astype(float)


def binomial_range(p: float, n: int = N_EXP, level: float = 0.99) -> tuple[float, float]:
    lo, hi = sps.binom.interval(level, n, p)
    return lo / n, hi / n


@pytest.fixture(scope="module")
def null_runs():
    out = {}
    for estimand in ("session_mean", "pooled"):
        X, Y = stats.estimand_matrices(*simulate(11), estimand)
        out[estimand] = {a: stats.estimate(X, Y, a, B, seed=5) for a in (0.05, 0.025)}
    return out


@pytest.mark.parametrize("estimand", ["session_mean", "pooled"])
def test_false_ship_rate_is_within_binomial_range_of_alpha(null_runs, estimand):
    """400 null experiments, 40 clustered sessions: a one-sided superiority test at α ships ≈ α of them."""
    for alpha, est in null_runs[estimand].items():
        rate = np.mean(stats.p_value(est, 0.0, "greater") < alpha)
        lo, hi = binomial_range(alpha)
        assert lo <= rate <= hi, (estimand, alpha, rate, (lo, hi))


@pytest.mark.parametrize("estimand", ["session_mean", "pooled"])
def test_95_percent_interval_covers_the_true_effect(null_runs, estimand):
    est = null_runs[estimand][0.025]  # intervals are two-sided at 1 − 2α = 95%
    covered = np.mean((est.ci[:, 0] <= 0) & (est.ci[:, 1] >= 0))
    assert 0.93 <= covered <= 0.97, covered
    covered_t = np.mean((est.ci_t[:, 0] <= 0) & (est.ci_t[:, 1] >= 0))
    assert 0.93 <= covered_t <= 0.97, covered_t


def test_interval_and_p_value_are_dual(null_runs):
    """p < α exactly when the interval's lower bound is above the threshold (no printed contradiction)."""
    est = null_runs["session_mean"][0.025]
    p = stats.p_value(est, 0.0, "greater")
    agree = (p < 0.025) == (est.ci[:, 0] > 0)
    assert agree.mean() >= 0.995  # only interpolation between adjacent replicates may differ


def test_planted_effect_of_twice_the_mde_is_shipped(null_runs):
    alpha, power = 0.025, 0.8
    est0 = null_runs["session_mean"][alpha]
    mde = float(np.median(stats.mde(est0.se, alpha, power)))
    for factor, lo, hi in ((2.0, 0.8, 1.0), (1.0, 0.7, 0.9)):
        X, Y = stats.estimand_matrices(*simulate(12, effect=factor * mde), "session_mean")
        est = stats.estimate(X, Y, alpha, B, seed=6)
        rate = np.mean(stats.p_value(est, 0.0, "greater") < alpha)
        assert lo <= rate <= hi, (factor, mde, rate)


def test_event_level_resampling_would_fail_the_same_calibration():
    """The reason the session is the unit: treating events as independent rejects far too often."""
    # Same structure as simulate(), but every event becomes its own resampling unit.
    rng = np.random.default_rng(13)
    d = [rng.normal() + rng.normal(size=k) for k in rng.integers(1, 9, size=(200, G)).ravel()]
    flat_sizes = [len(x) for x in d]
    cols = np.split(np.concatenate(d), np.cumsum([sum(flat_sizes[i * G : (i + 1) * G]) for i in range(200)])[:-1])
    width = max(len(c) for c in cols)
    X = np.zeros((width, 200))
    Y = np.zeros((width, 200))
    for k, c in enumerate(cols):
        X[: len(c), k], Y[: len(c), k] = c, 1
    est = stats.estimate(X, Y, 0.025, B, seed=7, expanded=False)
    rate = np.mean(stats.p_value(est, 0.0, "greater") < 0.025)
    assert rate > binomial_range(0.025, 200)[1], rate


def test_agrees_with_scipy_paired_bootstrap_on_unclustered_data():
    """One event per session: the cluster bootstrap is the plain paired bootstrap scipy implements.

    Endpoints must agree within Monte-Carlo error: the SE of a bootstrap quantile is about
    sqrt(q(1−q)/B) / f(ξ_q); two independent runs differ by √2 of that; we allow 4 of those.
    """
    rng = np.random.default_rng(3)
    g, resamples = 150, 10_000
    base = rng.normal(0.5, 0.2, g)
    cand = base + 0.05 + rng.gamma(2.0, 0.05, g)  # skewed, so BCa differs from percentile
    rows = [("r", "baseline", f"s{i:03d}", 0, 0, 0, "m", base[i], None) for i in range(g)]
    rows += [("r", "cand", f"s{i:03d}", 0, 0, 0, "m", cand[i], None) for i in range(g)]
    df = normalize(pd.DataFrame(rows, columns=COLUMNS))
    paired = stats.paired_differences(df, [("cand", "m")], "baseline")
    X, Y = stats.estimand_matrices(paired.diff_sum, paired.count, "session_mean")
    ours = stats.estimate(X, Y, 0.025, resamples, seed=1, expanded=False)

    def diff_mean(x, y, axis=-1):
        return np.mean(x - y, axis=axis)

    sd = ours.boot[:, 0].std()
    q = 0.025
    tol = 4 * np.sqrt(2) * np.sqrt(q * (1 - q) / resamples) / sps.norm.pdf(sps.norm.ppf(q)) * sd
    for method, mine in (("percentile", ours.ci[0]), ("BCa", ours.ci_bca[0])):
        ref = sps.bootstrap(
            (cand, base), diff_mean, paired=True, n_resamples=resamples, method=method, random_state=2
        ).confidence_interval
        assert abs(mine[0] - ref.low) < tol and abs(mine[1] - ref.high) < tol, (method, mine, ref, tol)
    assert ours.bca_note == [""]
    assert ours.estimate[0] == pytest.approx(np.mean(cand - base))
    assert ours.se[0] == pytest.approx(np.std(cand - base, ddof=1) / np.sqrt(g))


def test_constant_data_falls_back_without_nan():
    X = np.full((30, 2), 0.0)
    X[:, 1] = 0.5
    Y = np.ones((30, 2))
    est = stats.estimate(X, Y, 0.025, 500, seed=1)
    assert np.all(np.isfinite(est.ci)) and np.all(np.isfinite(est.ci_bca)) and np.all(np.isfinite(est.ci_t))
    assert est.ci_bca.tolist() == [[0.0, 0.0], [0.5, 0.5]]
    assert all("constant data" in n for n in est.bca_note)
    assert est.se.tolist() == [0.0, 0.0]
    assert stats.p_value(est, 0.4, "greater")[1] < 0.01 and stats.p_value(est, 0.0, "greater")[0] == 1.0
    one = stats.estimate(np.ones((1, 1)), np.ones((1, 1)), 0.025, 200, seed=1)
    assert "at least 3 sessions" in one.bca_note[0] and np.isnan(one.se[0])


def test_holm_matches_the_textbook_example():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005·4=0.02, 0.01·3=0.03, 0.03·2=0.06, 0.04·1=0.04→ running max 0.06
    assert stats.holm(p).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.9, 0.8]).tolist() == [1.0, 1.0]
    assert stats.holm([]).size == 0


def test_pairing_counts_unmatched_and_averages_replicates():
    rows = []
    for s in range(3):
        for e in range(2):
            rows.append(("r", "baseline", f"s{s}", e, e, 0, "m", 1.0, None))
            for rep, v in enumerate((2.0, 4.0)):  # replicates average to 3.0
                rows.append(("r", "cand", f"s{s}", e, e, rep, "m", v, None))
    rows.append(("r", "baseline", "s9", 0, 0, 0, "m", 1.0, None))  # baseline only: unmatched
    rows.append(("r", "cand", "s0", 7, 7, 0, "m", 5.0, None))  # candidate only: unmatched
    rows.append(("r", "cand", "s1", 1, 1, 2, "m", float("nan"), "judge timed out"))  # an error, not a zero
    df = normalize(pd.DataFrame(rows, columns=COLUMNS))
    p = stats.paired_differences(df, [("cand", "m")], "baseline")
    assert p.unmatched.tolist() == [2] and p.unmatched_sessions.tolist() == [1]
    assert p.errors.tolist() == [1] and p.rows.tolist() == [len(rows)]
    assert (p.count[:, 0] > 0).sum() == 3
    X, Y = stats.estimand_matrices(p.diff_sum, p.count, "session_mean")
    assert X.sum() / Y.sum() == pytest.approx(2.0)


def test_power_and_sessions_needed_follow_the_normal_formula():
    se, n = 0.02, 50
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert stats.mde(se, 0.025, 0.8) == pytest.approx(z * se)
    assert stats.achieved_power(z * se, se, 0.025) == pytest.approx(0.8)
    # ω² = n·se²; sessions for an effect equal to the MDE at n sessions is n itself
    assert stats.sessions_needed(z * se, se, n, 0.025, 0.8) == pytest.approx(n, abs=1)
