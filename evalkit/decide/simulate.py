"""A/A and planted-effect simulation of the decide stage's tests (``evalkit calibrate --simulate``).

Each experiment is one column of a (sessions × experiments) matrix handed to the same
:func:`evalkit.decide.stats.estimate` / :func:`~evalkit.decide.stats.p_value` the decide stage
uses, with the estimand "mean of session means". Shapes: binary metrics (p ≈ 0.2 and p ≈ 0.9),
lognormal values and zero-inflated counts, each with a random session effect and 1–8 events per
session; sparse differences (the arms differ in only k of 200 sessions, as with a deterministic
backend); a guardrail exactly at its margin; planted effects for coverage and power.

Not a test: it is run by hand (or by the lead) and its table is in ``docs/rules.md``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import stats as sps
from scipy.special import expit, logit

from evalkit.common.workers import stop_workers, worker_pool
from evalkit.decide import bootstrap, design, stats

SHAPES = ("binary-0.2", "binary-0.9", "lognormal", "zero-inflated")
SIZES = (20, 40, 200)  # verdicts need min_sessions (20) on a success metric
SPARSE_K = (3, 5, 8, 12, 20)
SESSION_SD = 0.5  # sd of the session effect (logit, log or log-rate scale)
ZERO_SHARE, RATE = 0.6, 2.0


def draw(
    shape: str, rng: np.random.Generator, G: int, E: int, effect: float
) -> tuple[np.ndarray, np.ndarray]:
    """(X, Y) of E experiments with G sessions: session means of candidate − baseline per event.

    ``effect`` is a logit shift for binary shapes and a multiplicative change (1 + effect) otherwise.
    """
    n = rng.integers(1, 9, size=(G, E))
    mask = np.arange(8)[None, None, :] < n[..., None]
    u = rng.normal(0, SESSION_SD, size=(G, E))[..., None]
    size = (G, E, 8)
    if shape.startswith("binary"):
        a = logit(float(shape.split("-")[1]))
        b = rng.random(size) < expit(a + u)
        c = rng.random(size) < expit(a + u + effect)
    elif shape == "lognormal":
        b = np.exp(u + rng.normal(size=size))
        c = (1 + effect) * np.exp(u + rng.normal(size=size))
    elif shape == "zero-inflated":
        lam = RATE * np.exp(u)
        b = (rng.random(size) > ZERO_SHARE) * rng.poisson(np.broadcast_to(lam, size))
        c = (rng.random(size) > ZERO_SHARE) * rng.poisson(np.broadcast_to(lam * (1 + effect), size))
    else:
        raise ValueError(f"unknown shape {shape!r}")
    d = (c.astype(float) - b.astype(float)) * mask
    return d.sum(axis=2) / n, np.ones((G, E))


def _session_effects() -> np.ndarray:
    """Quantiles of the session effect's distribution: expectations over sessions as plain means."""
    return sps.norm.ppf((np.arange(20_000) + 0.5) / 20_000) * SESSION_SD


def true_difference(shape: str, effect: float) -> float:
    """The estimand's true value: the mean over sessions of E[candidate − baseline | session]."""
    if shape.startswith("binary"):
        a, z = logit(float(shape.split("-")[1])), _session_effects()
        return float(np.mean(expit(a + z + effect) - expit(a + z)))
    mean_u = np.exp(SESSION_SD**2 / 2)
    if shape == "lognormal":
        return effect * mean_u * np.exp(0.5)
    return effect * (1 - ZERO_SHARE) * RATE * mean_u


def headroom(shape: str) -> float:
    """Largest possible true improvement: 1 − the baseline's mean for a 0/1 shape, unbounded otherwise."""
    if not shape.startswith("binary"):
        return float("inf")
    a, z = logit(float(shape.split("-")[1])), _session_effects()
    return float(1.0 - np.mean(expit(a + z)))


def effect_for(shape: str, difference: float) -> float:
    """The shape's effect parameter whose true difference is ``difference``."""
    if not shape.startswith("binary"):
        return difference / true_difference(shape, 1.0)
    lo, hi = -5.0, 5.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if true_difference(shape, mid) < difference else (lo, mid)
    return (lo + hi) / 2


def sparse_draw(rng: np.random.Generator, k: int, E: int, G: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """A/A experiments where only k of G sessions differ (binary p ≈ 0.2 replicates there, 0 elsewhere)."""
    X, Y = draw("binary-0.2", rng, G, E, 0.0)
    keep = np.argsort(rng.random((G, E)), axis=0) < k
    return np.where(keep, X, 0.0), Y


@dataclass
class Cell:
    """One row of the table: a question asked of E experiments of one shape and size, by one interval."""

    question: str
    shape: str
    n: int
    experiments: int
    hits: int
    target: str
    detail: str = ""
    method: str = "bootstrap-t"

    @property
    def rate(self) -> float:
        return self.hits / self.experiments

    def interval(self) -> tuple[float, float]:
        ci = sps.binomtest(self.hits, self.experiments).proportion_ci(0.95)
        return float(ci.low), float(ci.high)


def _batches(total: int, size: int) -> Iterator[int]:
    while total > 0:
        yield min(size, total)
        total -= size


def _covers(ci: np.ndarray, value: float) -> np.ndarray:
    return (ci[:, 0] <= value) & (ci[:, 1] >= value)


def _by_method(est: stats.Estimates, alpha: float):
    """(method, the estimates with that interval as ``ci``) for every bootstrap interval, from one set
    of resamples: the methods differ only in how they read the same draws."""
    for m in bootstrap.METHODS:
        ci = bootstrap.interval(m, est.draws, est.estimate, est.se, alpha)
        yield m, replace(est, method=m, ci=ci)


def _job(job: tuple) -> list[dict]:
    """Run one batch of one cell kind in a worker; returns partial cells (hits over experiments)."""
    kind, shape, n, E, seed, alpha, power, resamples = job
    rng = np.random.default_rng(seed)
    out = []
    if kind == "aa":
        X, Y = draw(shape, rng, n, E, 0.0)
        est = stats.estimate(X, Y, alpha, resamples, seed + 1, interval=False)
        flip = stats.sign_flip_p(est, 0.0, "greater") < alpha
        for m, e in _by_method(est, alpha):
            p = stats.p_value(e, 0.0, "greater")
            alone = stats.interval_p(e, 0.0, "greater") < alpha
            cover = "93–97%" if n >= 20 else "none (n < 20)"
            out += [
                dict(
                    method=m,
                    question="A/A false ship (min effect 0)",
                    hits=int((p < alpha).sum()),
                    target="≤ α",
                ),
                dict(method=m, question="A/A coverage", hits=int(_covers(e.ci, 0.0).sum()), target=cover),
                dict(
                    method=m,
                    question="A/A false ship, interval's test alone (no sign-flip guard)",
                    hits=int(alone.sum()),
                    target="none (information)",
                ),
            ]
        out.append(
            dict(
                method="sign-flip",
                question="A/A false ship, sign-flip test alone",
                hits=int(flip.sum()),
                target="none (information)",
            )
        )
        # The reported MDE of such a run, at a min effect of one SE (so the test's null is not zero).
        mde = design.mde(
            design.design_se(est), est.n_sessions, alpha, power, est.se, bootstrap.critical(est.draws, alpha)
        )
        out.append(
            dict(question="_mde", hits=0, target="", detail=[float(np.median(est.se)), float(np.median(mde))])
        )
    elif kind == "sparse":
        X, Y = sparse_draw(rng, n, E)
        est = stats.estimate(X, Y, alpha, resamples, seed + 1, interval=False)
        for m, e in _by_method(est, alpha):
            p = stats.p_value(e, 0.0, "greater")
            alone = stats.interval_p(e, 0.0, "greater") < alpha
            out += [
                dict(
                    method=m,
                    question=f"sparse A/A false ship (k = {n} of 200 differ)",
                    hits=int((p < alpha).sum()),
                    target="≤ α",
                ),
                dict(
                    method=m,
                    question=f"sparse A/A false ship, interval's test alone (k = {n} of 200)",
                    hits=int(alone.sum()),
                    target="none (information)",
                ),
            ]
    elif kind == "margin":
        # Guardrail exactly at its margin: the candidate is worse by 10% of the baseline mean.
        margin = true_difference(shape, 0.1)
        X, Y = draw(shape, rng, n, E, -0.1 if not shape.startswith("binary") else effect_for(shape, -margin))
        est = stats.estimate(X, Y, alpha, resamples, seed + 1, interval=False)
        for m, e in _by_method(est, alpha):
            p = stats.p_value(e, -margin, "greater")
            out.append(
                dict(
                    method=m,
                    question="guardrail at its margin declared non-inferior",
                    hits=int((p < alpha).sum()),
                    target="≤ α",
                )
            )
    elif kind == "effect":
        diff = true_difference(shape, 0.1 if not shape.startswith("binary") else 0.3)
        X, Y = draw(shape, rng, n, E, effect_for(shape, diff))
        est = stats.estimate(X, Y, alpha, resamples, seed + 1, interval=False)
        for m, e in _by_method(est, alpha):
            cover = "93–97%" if n >= 20 else "none (n < 20)"
            out.append(
                dict(
                    method=m,
                    question="coverage with a planted effect",
                    hits=int(_covers(e.ci, diff).sum()),
                    target=cover,
                )
            )
    return [dict(kind=kind, shape=shape, n=n, experiments=E) | o for o in out]


def _reported_mde(shape: str, n: int, E: int, rng, alpha, power, resamples, min_effect, diff) -> float:
    """Median MDE that runs with a true difference ``diff`` report (their own SE, which the effect changes)."""
    X, Y = draw(shape, rng, n, E, effect_for(shape, diff))
    est = stats.estimate(X, Y, alpha, min(resamples, 2000), int(rng.integers(2**31)), interval=False)
    crit = bootstrap.critical(est.draws, alpha)
    return float(np.median(design.mde(design.design_se(est), est.n_sessions, alpha, power, min_effect, crit)))


def _mde_job(job: tuple) -> tuple[float, float, float]:
    """(min effect, MDE, headroom) of one power cell: the MDE a run reports when its true effect is
    that MDE (a fixed point, 3 steps: the effect changes the SE the MDE is computed from)."""
    shape, n, seed, alpha, power, resamples, min_effect, mde = job
    rng = np.random.default_rng(seed)
    for _ in range(3):
        mde = _reported_mde(shape, n, 200, rng, alpha, power, resamples, min_effect, mde)
    return min_effect, mde, headroom(shape)


def _power_job(job: tuple) -> list[dict]:
    """One batch of a power cell: experiments with the MDE planted, tested against the min effect."""
    shape, n, E, seed, alpha, resamples, min_effect, mde, room = job
    rng = np.random.default_rng(seed)
    # The decide stage reports such an MDE as unreachable (beyond a 0/1 metric's range), not as a
    # number: the cell's power is measured at the largest possible difference but has no target.
    reportable = mde <= room
    X, Y = draw(shape, rng, n, E, effect_for(shape, min(mde, 0.999 * room)))
    est = stats.estimate(X, Y, alpha, resamples, seed + 1, interval=False)
    detail = f"min effect {min_effect:.3g}, MDE {mde:.3g}"
    if not reportable:
        detail += f" > range {room:.3g}: reported as unreachable; power at +{room:.3g}"
    return [
        dict(
            kind="power",
            shape=shape,
            n=n,
            experiments=E,
            method=m,
            hits=int((stats.p_value(e, min_effect, "greater") < alpha).sum()),
            question="power at 1× the reported MDE",
            target="≥ 75%" if reportable else "none (no MDE reported)",
            detail=detail,
        )
        for m, e in _by_method(est, alpha)
    ]


def _merge(parts: list[dict]) -> list[Cell]:
    cells: dict[tuple, Cell] = {}
    for p in parts:
        if p["question"] == "_mde":
            continue
        key = (p["method"], p["question"], p["shape"], p["n"])
        if key not in cells:
            cells[key] = Cell(
                p["question"], p["shape"], p["n"], 0, 0, p["target"], p.get("detail") or "", p["method"]
            )
        cells[key].experiments += p["experiments"]
        cells[key].hits += p["hits"]
    return list(cells.values())


def simulate(
    experiments: int = 2000,
    alpha: float = 0.025,
    power: float = 0.8,
    resamples: int = 10_000,
    seed: int = 20261130,
    workers: int | None = None,
    progress: bool = True,
) -> list[Cell]:
    """Every cell of the calibration table, ``experiments`` per cell, for every bootstrap interval
    (they read the same resamples, so one simulation measures all three)."""
    from tqdm import tqdm

    batch = 250
    jobs = []
    ss = np.random.SeedSequence(seed)
    for shape in SHAPES:
        for n in SIZES:
            jobs += [("aa", shape, n, e) for e in _batches(experiments, batch)]
            jobs += [("effect", shape, n, e) for e in _batches(experiments, batch)]
    for k in SPARSE_K:
        jobs += [("sparse", "binary-0.2", k, e) for e in _batches(experiments, batch)]
    for shape in ("lognormal", "zero-inflated"):
        for n in (20, 40, 200):
            jobs += [("margin", shape, n, e) for e in _batches(experiments, batch)]
    seeds = ss.generate_state(len(jobs) + 65 * len(SHAPES) * len(SIZES))
    full = [(*j, int(seeds[i]), alpha, power, resamples) for i, j in enumerate(jobs)]
    workers = workers or min(2, os.cpu_count() or 1)
    parts: list[dict] = []
    # Workers that leave Ctrl-C to this process (a worker waiting for its next job printed a
    # traceback); on Ctrl-C they are ended at once, as a simulation keeps nothing half-done.
    pool = worker_pool(workers)
    try:
        for res in tqdm(pool.map(_job, full), total=len(full), desc="simulate", disable=not progress):
            parts += res
        # Power at the MDE a run of each shape reports (median over its A/A experiments).
        mdes: dict[tuple, list] = {}
        for p in parts:
            if p["question"] == "_mde":
                mdes.setdefault((p["shape"], p["n"]), []).append(p["detail"])
        cells = sorted(mdes.items())
        fixed = [
            (
                shape,
                n,
                int(seeds[len(jobs) + i]),
                alpha,
                power,
                resamples,
                *map(float, np.median(vals, axis=0)),
            )
            for i, ((shape, n), vals) in enumerate(cells)
        ]
        # One fixed point per cell (it needs the cell's MDE before drawing), then batches as above.
        points = list(tqdm(pool.map(_mde_job, fixed), total=len(fixed), desc="MDE", disable=not progress))
        pjobs = [
            (shape, n, e, int(seeds[len(jobs) + len(cells) + 64 * i + j]), alpha, resamples, *point)
            for i, (((shape, n), _), point) in enumerate(zip(cells, points, strict=True))
            for j, e in enumerate(_batches(experiments, batch))
        ]
        for res in tqdm(pool.map(_power_job, pjobs), total=len(pjobs), desc="power", disable=not progress):
            parts += res
    except BaseException:
        stop_workers(pool)
        raise
    pool.shutdown()
    return _merge(parts)


def holds(c: Cell, alpha: float = 0.025) -> bool | None:
    """Whether a cell meets its target: an error rate at or below the top of α's binomial 95% range
    at the cell's experiments, coverage 93–97%, power ≥ 75%; None for rows without a target."""
    if c.target == "≤ α":
        return bool(c.hits <= sps.binom.ppf(0.975, c.experiments, alpha))
    if c.target == "93–97%":
        return 0.93 <= c.rate <= 0.97
    if c.target == "≥ 75%":
        return c.rate >= 0.75
    return None


def table(
    cells: list[Cell], alpha: float = 0.025, resamples: int | None = None, seed: int | None = None
) -> str:
    """Markdown: per interval method (the default first), headed by its name as decision.json gives
    it (with ``resamples`` and ``seed`` when known), one row per cell with the rate, its binomial
    95% range and whether the target holds."""
    out = []
    for method in (*bootstrap.METHODS, "sign-flip"):
        mine = [c for c in cells if c.method == method]
        if not mine:
            continue
        if method not in bootstrap.NAMES:
            name = "sign-flip test alone"
        elif resamples is None or seed is None:
            name = f"{100 * (1 - 2 * alpha):g}% session {bootstrap.NAMES[method]}"
        else:
            name = bootstrap.label(method, 1 - 2 * alpha, resamples, seed)
        missed = sum(holds(c, alpha) is False for c in mine)
        with_target = sum(holds(c, alpha) is not None for c in mine)
        out += [
            f"### {name}" + (" (the default)" if method == bootstrap.METHODS[0] else ""),
            "",
            f"{with_target - missed} of {with_target} rows with a target hold.",
            "",
            "| question | shape | n | experiments | rate | binomial 95% range | target | holds |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in mine:
            lo, hi = c.interval()
            h = holds(c, alpha)
            verdict = "n/a" if h is None else "yes" if h else "**no**"
            shape = c.shape + (f" ({c.detail})" if c.detail else "")
            out.append(
                f"| {c.question} | {shape} | {c.n} | {c.experiments} | {c.rate:.2%} | [{lo:.2%}, {hi:.2%}] | "
                f"{c.target} | {verdict} |"
            )
        out.append("")
    return "\n".join(out)


def as_json(cells: list[Cell]) -> list[dict]:
    return [asdict(c) | {"rate": c.rate, "ci95": list(c.interval())} for c in cells]
