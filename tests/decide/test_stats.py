"""Statistics: calibration under clustered null data, agreement with scipy, and the building blocks.

The practice followed is REFERENCES.md §3: the session is the unit; the sign-flip test swaps the
arms' labels within whole sessions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from evalkit.contracts.metrics import COLUMNS, normalize
from evalkit.decide import design, stats

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
    """400 null experiments, 40 clustered sessions: a one-sided superiority test at α ships ≈ α of them.

    A smoke test only (its 99% range cannot see 3.0% against 2.5%); the 16,000-experiment
    calibration is ``evalkit calibrate --simulate`` (docs/rules.md)."""
    for alpha, est in null_runs[estimand].items():
        rate = np.mean(stats.p_value(est, 0.0, "greater") < alpha)
        lo, hi = binomial_range(alpha)
        assert lo <= rate <= hi, (estimand, alpha, rate, (lo, hi))


@pytest.mark.parametrize("estimand", ["session_mean", "pooled"])
def test_95_percent_interval_covers_the_true_effect(null_runs, estimand):
    est = null_runs[estimand][0.025]  # intervals are two-sided at 1 − 2α = 95%
    covered = np.mean((est.ci[:, 0] <= 0) & (est.ci[:, 1] >= 0))
    assert 0.93 <= covered <= 0.97, covered
    covered_flip = np.mean((est.ci_sign_flip[:, 0] <= 0) & (est.ci_sign_flip[:, 1] >= 0))
    assert 0.93 <= covered_flip <= 0.97, covered_flip


@pytest.mark.parametrize("estimand", ["session_mean", "pooled"])
def test_a_significant_result_never_contradicts_the_printed_interval(null_runs, estimand):
    """The decision p is the larger of the sign-flip p and the printed t interval's own test: p < α
    exactly when both reject, so a rejection always has the interval beyond the threshold; and the
    inverted sign-flip interval is dual to the sign-flip p-value alone."""
    est = null_runs[estimand][0.025]
    for thr in (0.0, -0.2, 0.2):
        for side, beyond, beyond_flip in (
            ("greater", est.ci[:, 0] > thr, est.ci_sign_flip[:, 0] > thr),
            ("less", est.ci[:, 1] < thr, est.ci_sign_flip[:, 1] < thr),
        ):
            p = stats.p_value(est, thr, side)
            assert not np.any((p < 0.025) & ~beyond)
            flip = stats.sign_flip_p(est, thr, side) < 0.025
            assert np.array_equal(flip, beyond_flip)
            assert np.array_equal(p < 0.025, flip & beyond)


def test_planted_effect_at_the_mde_ships_with_the_stated_power(null_runs):
    """The MDE is the true effect at which the test against the min effect has power 0.8."""
    alpha, power = 0.025, 0.8
    est0 = null_runs["session_mean"][alpha]
    se = float(np.median(est0.se))
    min_effect = se  # the null of the ship test is the min effect, not zero
    mde = float(design.mde(se, G, alpha, power, min_effect))
    for effect, lo, hi in ((mde, 0.7, 0.9), (min_effect, 0.0, 0.06)):
        X, Y = stats.estimand_matrices(*simulate(12, effect=effect), "session_mean")
        est = stats.estimate(X, Y, alpha, B, seed=6)
        rate = np.mean(stats.p_value(est, min_effect, "greater") < alpha)
        assert lo <= rate <= hi, (effect, mde, rate)
    assert design.achieved_power(mde, se, G, alpha, min_effect) == pytest.approx(power)


def test_sparse_differences_get_exact_p_values():
    """k sessions of 200 differ, all in one direction: the exact sign-flip p is 2^-k, whatever B is."""
    for k in (3, 4, 8, 12):
        X = np.zeros((200, 1))
        X[:k, 0] = 1.0
        est = stats.estimate(X, np.ones((200, 1)), 0.025, 200, seed=1)
        assert stats.p_value(est, 0.0, "greater")[0] == pytest.approx(2.0**-k)
        assert stats.p_value(est, 0.0, "less")[0] == 1.0


# 20 session differences of a lognormal metric whose candidate is worse by 10% (the margin,
# 0.1868 in these units): heavy-tailed, so the sign-flip test against the shifted null says p ≈ 0.013.
AT_MARGIN = [
    0.31,
    4.18,
    -1.25,
    -0.11,
    0.21,
    -0.58,
    0.37,
    0.42,
    -0.58,
    0.26,
    0.23,
    -0.34,
    1.63,
    0.21,
    0.4,
    0.06,
    0.84,
    0.47,
    -0.21,
    -0.84,
]


def test_a_non_zero_threshold_also_needs_the_t_test():
    """Against a margin the shifted differences are not symmetric and the sign-flip test alone said
    p ≈ 0.013 here: the printed t interval's test must agree before a guardrail is non-inferior."""
    X = np.array(AT_MARGIN)[:, None]
    est = stats.estimate(X, np.ones_like(X), 0.025, 2000, seed=1)
    z = X[:, 0] + 0.1868
    t_p = sps.ttest_1samp(z, 0.0, alternative="greater").pvalue
    assert 0.025 < t_p < 0.05 and stats.sign_flip_p(est, -0.1868, "greater")[0] < 0.025
    assert stats.p_value(est, -0.1868, "greater")[0] == pytest.approx(t_p)  # not non-inferior
    assert est.ci[0, 0] < -0.1868
    # At zero too: the exact sign-flip test rejects, the t interval does not lie above 0 (p 0.036).
    shifted = stats.estimate(X + 0.1868, np.ones_like(X), 0.025, 2000, seed=1)
    assert stats.sign_flip_p(shifted, 0.0, "greater")[0] < 0.025
    assert stats.p_value(shifted, 0.0, "greater")[0] == pytest.approx(t_p) and shifted.ci[0, 0] < 0


def test_agrees_with_scipy_permutation_test_on_paired_data():
    """One event per session: the test is scipy's paired ("samples") permutation test."""
    rng = np.random.default_rng(3)
    for g in (10, 60):
        base = rng.normal(0.5, 0.2, g)
        cand = base + 0.02 + rng.gamma(2.0, 0.05, g) - 0.1  # skewed differences
        rows = [("r", "baseline", f"s{i:03d}", 0, 0, 0, "m", base[i], None) for i in range(g)]
        rows += [("r", "cand", f"s{i:03d}", 0, 0, 0, "m", cand[i], None) for i in range(g)]
        df = normalize(pd.DataFrame(rows, columns=COLUMNS))
        paired = stats.paired_differences(df, [("cand", "m")], "baseline")
        X, Y = stats.estimand_matrices(paired.diff_sum, paired.count, "session_mean")
        ours = stats.estimate(X, Y, 0.025, 20_000, seed=1)
        ref = sps.permutation_test(
            (cand, base),
            lambda x, y, axis=-1: np.mean(x - y, axis=axis),
            permutation_type="samples",
            alternative="greater",
            n_resamples=20_000,
            random_state=2,
        ).pvalue
        mine = stats.sign_flip_p(ours, 0.0, "greater")[0]
        # g = 10 is exact in both (1,024 patterns); at g = 60 both are Monte Carlo: allow 4 SEs of two runs.
        tol = 1e-12 if g == 10 else 4 * np.sqrt(2 * ref * (1 - ref) / 20_000)
        assert abs(mine - ref) <= tol, (g, mine, ref)
        assert ours.estimate[0] == pytest.approx(np.mean(cand - base))
        assert ours.se[0] == pytest.approx(np.std(cand - base, ddof=1) / np.sqrt(g))


def test_constant_data_has_zero_se_and_no_nan():
    X = np.full((30, 2), 0.0)
    X[:, 1] = 0.5
    Y = np.ones((30, 2))
    est = stats.estimate(X, Y, 0.025, 500, seed=1)
    assert np.all(np.isfinite(est.ci)) and np.all(np.isfinite(est.ci_sign_flip))
    assert est.ci.tolist() == [[0.0, 0.0], [0.5, 0.5]]
    assert est.se.tolist() == [0.0, 0.0]
    assert stats.p_value(est, 0.4, "greater")[1] < 0.01 and stats.p_value(est, 0.0, "greater")[0] == 1.0
    one = stats.estimate(np.ones((1, 1)), np.ones((1, 1)), 0.025, 200, seed=1)
    assert np.isnan(one.se[0]) and stats.p_value(one, 0.0, "greater")[0] == 0.5


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
    assert p.lost_sessions.tolist() == [1] and p.extra_sessions.tolist() == [0]
    assert p.errors.tolist() == [1] and p.rows.tolist() == [14] and p.base_rows.tolist() == [7]
    assert (p.count[:, 0] > 0).sum() == 3
    X, Y = stats.estimand_matrices(p.diff_sum, p.count, "session_mean")
    assert X.sum() / Y.sum() == pytest.approx(2.0)


def test_power_and_sessions_needed_use_the_tests_quantiles_and_null():
    se, n, alpha, power, delta = 0.02, 50, 0.025, 0.8, 0.05
    k = design.t_critical(n, alpha) + sps.t.ppf(power, n - 1)
    assert design.t_critical(10, alpha) > sps.t.ppf(1 - alpha, 9) > sps.norm.ppf(1 - alpha)
    assert design.mde(se, n, alpha, power, delta) == pytest.approx(delta + k * se)
    assert design.achieved_power(delta + k * se, se, n, alpha, delta) == pytest.approx(power)
    assert 0.015 < design.achieved_power(delta, se, n, alpha, delta) <= alpha  # t* ≥ t: at most α at the null
    # ω² = n·se²; sessions for power at the MDE with n sessions is n itself
    assert design.sessions_needed(delta + k * se, se, n, alpha, power, delta) == pytest.approx(n, abs=1)


@pytest.mark.parametrize("sessions", [10, 20])
def test_interval_agrees_with_the_exact_p_value_at_zero(sessions):
    """Where the p-value is exact (≤ 12 sessions, or ≤ 12 differing), the interval comes from the same
    balanced sign vectors: 0 lies outside it exactly when a one-sided test at 0 rejects.

    Before, the interval came from random sign vectors while the p-value was exact, and 0.1–0.2% of
    small binary experiments printed an interval that contradicted the verdict at 0."""
    from evalkit.decide.simulate import draw

    X, Y = draw("binary-0.9", np.random.default_rng(11), sessions, 2000, 0.0)
    est = stats.estimate(X, Y, 0.025, 2000, seed=5)
    for side, beyond in (("greater", est.ci_sign_flip[:, 0] > 0), ("less", est.ci_sign_flip[:, 1] < 0)):
        assert np.array_equal(stats.sign_flip_p(est, 0.0, side) < 0.025, beyond), side
    assert est.exact.mean() > 0.5  # most of these columns have ≤ 12 differing sessions


def test_interval_with_few_sessions_is_the_exact_inverted_test():
    """10 sessions: the interval's bounds are order statistics of r over all 1,024 sign patterns."""
    x = np.array([0.9, -0.2, 0.4, 1.3, 0.05, 0.7, -0.6, 0.35, 1.1, 0.2])
    est = stats.estimate(x[:, None], np.ones((10, 1)), 0.025, 500, seed=3)
    bits = (np.arange(1024)[:, None] >> np.arange(10)) & 1
    fy = bits.sum(axis=1)
    r = np.sort(np.where(fy > 0, (bits @ x) / np.maximum(fy, 1), -np.inf))
    c = int(np.ceil(0.025 * 1024))  # smallest count of draws r ≤ δ with p = count/1024 ≥ α
    assert est.ci_sign_flip[0, 0] == pytest.approx(r[c - 1])
    r_hi = np.sort(np.where(fy > 0, (bits @ x) / np.maximum(fy, 1), np.inf))[::-1]
    assert est.ci_sign_flip[0, 1] == pytest.approx(r_hi[c - 1])


def test_design_se_is_median_unbiased_and_larger_for_heavy_tails():
    """The MDE's SE is SE·√(ν/χ²_{0.5,ν}), ν = 2s⁴/Var_jk(s²) capped at n − 1: at most the normal
    factor for light tails, more for heavy ones (the median run's SE is below σ/√n)."""
    n, alpha = 20, 0.025
    light = np.linspace(-1, 1, n)[:, None]  # uniform-like: ν capped at n − 1
    est = stats.estimate(light, np.ones((n, 1)), alpha, 200, seed=1, interval=False)
    normal = np.sqrt((n - 1) / sps.chi2.ppf(0.5, n - 1))
    assert design.design_se(est)[0] == pytest.approx(est.se[0] * normal)
    heavy = np.sign(light) * np.abs(light) ** 6
    est = stats.estimate(heavy, np.ones((n, 1)), alpha, 200, seed=1, interval=False)
    assert design.design_se(est)[0] > est.se[0] * normal * 1.01
    tiny = stats.estimate(
        np.array([[1.0], [2.0], [4.0]]), np.ones((3, 1)), alpha, 200, seed=1, interval=False
    )
    assert design.design_se(tiny)[0] == tiny.se[0]  # too few sessions to say: unchanged


def test_reported_mde_uses_the_median_unbiased_se():
    """Binary p ≈ 0.2 at n = 20: at 1× the MDE of t* + t_power raw SEs the test had power 74.1%
    [72.7, 75.5] (4,000 experiments); the decide stage's MDE is now above that, by the SE factor."""
    alpha, power, n, delta = 0.025, 0.8, 20, 0.07
    rng = np.random.default_rng(8)
    events = rng.integers(1, 9, size=(n, 1))
    mask = np.arange(8)[None, :] < events
    X = (((rng.random((n, 8)) < 0.52).astype(float) - (rng.random((n, 8)) < 0.2)) * mask).sum(
        axis=1
    ) / events[:, 0]
    est = stats.estimate(X[:, None], np.ones((n, 1)), alpha, 2000, seed=1, interval=False)
    se = design.design_se(est)
    k = design.t_critical(n, alpha) + sps.t.ppf(power, n - 1)
    assert se[0] > est.se[0] * 1.015
    assert design.mde(se, n, alpha, power, delta)[0] == pytest.approx(delta + k * se[0])
    assert design.mde(se, n, alpha, power, delta)[0] > delta + k * est.se[0] + 0.004


def test_point_estimates_from_present_cells_match_the_ratio_formulas():
    """The A/A noise floor is computed from the present cells only (no G × K matrix). Estimate,
    clustered SE, t interval, sessions and differing sessions agree with the formulas written out
    column by column (θ = ΣX/ΣY; u = X − θY; SE = √(n/(n−1))·√Σu²/ΣY; θ ± t_{1−α, n−1}·SE), with
    the cells given column by column (the dense :func:`stats.estimate` passes them session by
    session), under both estimands, including a one-session column (no SE), a constant column
    (SE exactly 0) and an absent one."""
    sums, n = simulate(7, effect=0.2, experiments=9, sessions=30)
    alpha = 0.025
    for estimand in ("session_mean", "pooled"):
        X, Y = stats.estimand_matrices(sums, n, estimand)
        X[1:, 5], Y[1:, 5] = 0.0, 0.0  # one session present
        X[:, 6] = 0.25 * Y[:, 6]  # every present session differs by the same amount per unit
        X[:, 7], Y[:, 7] = 0.0, 0.0  # absent
        col, g = np.nonzero((Y > 0).T)  # column-major: each column's cells in session order
        got = stats.point_estimates(col, X[g, col], Y[g, col], X.shape[1], alpha)
        dense = stats.estimate(X, Y, alpha, 200, 3)
        for k in range(X.shape[1]):
            on = Y[:, k] > 0
            x, y = X[on, k], Y[on, k]
            assert got.n_sessions[k] == dense.n_sessions[k] == on.sum()
            assert got.differing[k] == dense.differing[k] == (x != 0).sum()
            if not on.any():
                assert np.isnan(got.estimate[k]) and np.isnan(dense.estimate[k])
                continue
            theta = x.sum() / y.sum()
            assert got.estimate[k] == pytest.approx(theta, rel=1e-12)
            assert dense.estimate[k] == pytest.approx(theta, rel=1e-12)
            if on.sum() < 2:
                assert np.isnan(got.se[k]) and np.isnan(dense.se[k])
                continue
            m = on.sum()
            se = np.sqrt(m / (m - 1)) * np.sqrt(((x - theta * y) ** 2).sum()) / y.sum()
            half = sps.t.ppf(1 - alpha, m - 1) * se
            for est in (got, dense):
                assert est.se[k] == pytest.approx(se, rel=1e-9, abs=1e-15)
                assert est.ci[k] == pytest.approx([theta - half, theta + half], rel=1e-9, abs=1e-15)
        assert got.n_sessions[5] == 1 and np.isnan(got.se[5])
        assert got.se[6] == 0.0 and got.estimate[6] == pytest.approx(0.25)
        assert got.n_sessions[7] == 0
        assert (got.se[:5] > 0).all()
