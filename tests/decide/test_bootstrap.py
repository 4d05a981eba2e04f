"""The session-cluster bootstrap: agreement with scipy.stats.bootstrap, degenerate resamples, and
the interval never disagreeing with its own test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from benchmarks.stats import scipy_bootstrap_t
from evalkit.decide import bootstrap, stats
from evalkit.decide.simulate import draw
from evalkit.decide.words import interval

B = 20_000


def _ratio(x, y, axis=-1):
    return x.sum(axis=axis) / y.sum(axis=axis)


def _small_case(seed: int, pooled: bool):
    """25 sessions of skewed differences; pooled: unequal event counts per session (a ratio of sums)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, 25).astype(float) if pooled else np.ones(25)
    x = (rng.lognormal(size=25) - rng.lognormal(size=25) + 0.3) * y
    return x, y


@pytest.mark.parametrize("pooled", [False, True])
def test_percentile_and_bca_match_scipy_bootstrap(pooled):
    """Same interval as scipy.stats.bootstrap (paired over sessions, statistic ΣX/ΣY) within Monte
    Carlo tolerance: two independent 20,000-resample runs of the same interval."""
    x, y = _small_case(1, pooled)
    for method, scipy_method in (("percentile", "percentile"), ("bca", "BCa")):
        ours = stats.estimate(x[:, None], y[:, None], 0.025, B, seed=4, method=method).ci[0]
        ref = sps.bootstrap(
            (x, y), _ratio, paired=True, vectorized=True, n_resamples=B, method=scipy_method, random_state=5
        ).confidence_interval
        width = ref.high - ref.low
        assert ours == pytest.approx([ref.low, ref.high], abs=0.04 * width), (method, ours, ref)


@pytest.mark.parametrize("pooled", [False, True])
def test_bootstrap_t_matches_scipy_bootstrap_of_the_studentized_statistic(pooled):
    """scipy has no bootstrap-t method: the reference bootstraps (θ* − θ̂)/SE* with the same clustered SE
    and reads its percentiles (benchmarks.stats.scipy_bootstrap_t); the decision interval's critical
    values are those, floored at Student's t on n − 1 df (the small-sample correction)."""
    x, y = _small_case(2, pooled)
    est = stats.estimate(x[:, None], y[:, None], 0.025, B, seed=4)
    theta, se = est.estimate[0], est.se[0]
    (lo, hi), p_ref = scipy_bootstrap_t(x, y, B, 0.025, 0.0, seed=5)
    half = sps.t.ppf(0.975, 24) * se
    assert est.ci[0] == pytest.approx([min(lo, theta - half), max(hi, theta + half)], abs=0.04 * (hi - lo))
    assert lo < theta - half  # this skewed case: the bootstrap widens the lower side beyond t
    p = stats.interval_p(est, 0.0, "greater")[0]
    assert p == pytest.approx(max(p_ref, sps.t.sf(theta / se, 24)), abs=0.01)


def test_bootstrap_t_is_never_narrower_than_the_t_interval():
    """Symmetric differences: the T* quantiles are noise around ±t, and the floor keeps Student's t."""
    x = np.linspace(-1.0, 1.0, 30) + 0.1
    est = stats.estimate(x[:, None], np.ones((30, 1)), 0.025, 4000, seed=1)
    half = sps.t.ppf(0.975, 29) * est.se[0]
    assert est.ci[0, 0] <= est.estimate[0] - half + 1e-12
    assert est.ci[0, 1] >= est.estimate[0] + half - 1e-12


@pytest.mark.parametrize("method", bootstrap.METHODS)
def test_interval_and_its_test_never_disagree(method):
    """At any threshold, both sides: the test at α rejects exactly when the interval lies beyond δ,
    for 0/1 metrics with few differing sessions as well as skewed continuous ones."""
    rng = np.random.default_rng(9)
    for shape, n in (("binary-0.9", 20), ("lognormal", 20), ("zero-inflated", 40)):
        X, Y = draw(shape, rng, n, 300, 0.2)
        est = stats.estimate(X, Y, 0.025, 1000, seed=3, method=method)
        for thr in (-0.5, -0.05, 0.0, 0.05, 0.5):
            for side, beyond in (("greater", est.ci[:, 0] > thr), ("less", est.ci[:, 1] < thr)):
                p = stats.interval_p(est, thr, side)
                assert np.array_equal(p < 0.025, beyond), (shape, thr, side)
                # The decision needs the sign-flip test as well: it can only refuse more.
                both = stats.p_value(est, thr, side) < 0.025
                assert not np.any(both & ~beyond)


def test_a_handful_of_differing_sessions_leaves_the_far_bound_open():
    """3 of 200 sessions differ (a 0/1 metric): e^−3 ≈ 5% of the resamples draw none of them (SE* = 0,
    θ* = 0 < θ̂, T* = −∞), more than α, so no upper bound exists (the words say ∞), and the
    decision's p is at least the exact sign-flip test's 2^−3."""
    X = np.zeros((200, 1))
    X[:3, 0] = 1.0
    est = stats.estimate(X, np.ones((200, 1)), 0.025, 4000, seed=1)
    share = np.mean(np.isinf(est.draws.T[:, 0]) & (est.draws.T[:, 0] < 0))
    assert 0.03 < share < 0.07
    assert est.ci[0, 1] == np.inf and np.isfinite(est.ci[0, 0]) and est.ci[0, 0] < est.estimate[0]
    assert stats.sign_flip_p(est, 0.0, "greater")[0] == pytest.approx(2.0**-3)
    assert stats.p_value(est, 0.0, "greater")[0] >= 2.0**-3
    assert interval(est.ci[0]).endswith(", ∞]")


def test_sparse_differences_keep_exact_sign_flip_p_values():
    """k of 200 sessions differ, all one way: the sign-flip p is 2^−k whatever B is, and the
    decision's p is never below it."""
    for k in (3, 4, 8, 12):
        X = np.zeros((200, 1))
        X[:k, 0] = 1.0
        est = stats.estimate(X, np.ones((200, 1)), 0.025, 200, seed=1)
        assert stats.sign_flip_p(est, 0.0, "greater")[0] == pytest.approx(2.0**-k)
        assert stats.p_value(est, 0.0, "greater")[0] >= 2.0**-k
        assert stats.p_value(est, 0.0, "less")[0] == 1.0


def test_constant_and_single_session_columns():
    """Every session differs by the same amount: every resample is the data, the interval is the
    point. One session: no SE, no interval (NaN), and the interval's test does not bind."""
    X = np.zeros((30, 3))
    X[:, 1] = 0.5
    X[1:, 2] = 0.0
    X[0, 2] = 0.7
    Y = np.ones((30, 3))
    Y[1:, 2] = 0.0
    for method in bootstrap.METHODS:
        est = stats.estimate(X, Y, 0.025, 500, seed=1, method=method)
        assert est.ci[:2].tolist() == [[0.0, 0.0], [0.5, 0.5]], method
        assert np.isnan(est.ci[2]).all() and np.isnan(est.se[2])
        assert stats.interval_p(est, 0.4, "greater")[1] < 0.025
        assert stats.interval_p(est, 0.5, "greater")[1] >= 0.025
        assert stats.interval_p(est, 0.0, "greater")[2] == 0.0


def test_session_weights_are_resamples_of_whole_sessions():
    w = bootstrap.session_weights(np.random.default_rng(1), 50, 400)
    assert w.shape == (400, 50) and (w.sum(axis=1) == 50).all()
    assert w.mean() == pytest.approx(1.0) and w.var() == pytest.approx(1 - 1 / 50, rel=0.05)


def test_count_rule_and_bounds_use_the_same_m():
    for B in (100, 999, 10_000):
        m = bootstrap.most_beyond(0.025, B)
        assert (1 + m) / (1 + B) < 0.025 <= (2 + m) / (1 + B)
    assert (
        bootstrap.label("bootstrap-t", 0.95, 10_000, 7) == "95% session bootstrap-t, 10000 resamples, seed 7"
    )
    assert bootstrap.label("bca", 0.95, 500, 7).startswith("95% session BCa")


def test_compare_names_both_runs_intervals(tmp_path):
    """`evalkit compare` prints each run's decision interval by the name decision.json gives it."""
    import json

    from evalkit.report.compare import render_compare

    label = "95% session bootstrap-t, 10000 resamples, seed 20261130"
    for name, stats_block in (
        ("a", {"printed_interval": "t"}),
        ("b", {"printed_interval": "bootstrap-t", "interval": label}),
    ):
        run = tmp_path / name
        run.mkdir()
        m = {"estimate": 0.1, "ci": [0.05, None], "n_sessions": 30}
        decision = {
            "stats": stats_block,
            "verdicts": {"c": {"verdict": "ship", "reason": "r", "metrics": {"m": m}}},
        }
        (run / "decision.json").write_text(json.dumps(decision))
        (run / "config.json").write_text(json.dumps({"config_hash": name * 64, "config": {}}))
    text = render_compare(tmp_path / "a", tmp_path / "b")
    assert f"intervals: A clustered t (an older run), B {label}" in text


def test_design_plans_with_the_bootstrap_t_critical_value_only_where_it_is_bounded():
    """A skewed comparison's c_hi above t* raises the MDE; an unbounded one (no spread, a handful of
    differing sessions) leaves t*, so a constant difference keeps its MDE at the threshold."""
    from evalkit.decide import design

    t_star = float(design.t_critical(30, 0.025))
    assert design.critical(30, 0.025, [t_star + 1, np.inf, np.nan]).tolist() == pytest.approx(
        [t_star + 1, t_star, t_star]
    )
    assert design.mde(0.0, 30, 0.025, 0.8, 0.05, np.inf) == pytest.approx(0.05)
    assert design.mde(0.1, 30, 0.025, 0.8, 0.05, t_star + 1) > design.mde(0.1, 30, 0.025, 0.8, 0.05)
