"""Calibration on a run's own data: how often its rules ship, drop or pass by chance, and their power.

For each judged candidate × metric, null experiments are generated from the run's real paired
differences by swapping the two arms' labels of every matched (session, event) pair at random,
which keeps the sessions, their events and the size and skew of the real differences but has no
effect. Shifting a null experiment by c per session is the same as testing it against
threshold − c, so one set of sign-flip tests per comparison answers:

- success metric: *false ship* (true effect exactly the min effect: ships ≤ α of the time),
  *false drop* (true effect zero: dropped ≤ α);
- guardrail: *false pass* (true difference exactly at the margin: declared non-inferior ≤ α),
  *false drop* (exactly at the margin: declared worse ≤ α).

Power needs the run's own spread, which swapped labels do not keep when the candidate has a real
effect (the swapped differences then carry the effect as noise). It is measured on the session
residuals X_g − θ̂·Y_g with random signs and the effect planted: a success metric at the MDE the
run reports, a guardrail at "no change", beside the power the run reports.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as sps

from evalkit.decide import bootstrap, stats
from evalkit.decide.rules import Rules, read_rules_file, resolve_rules, rules_table
from evalkit.decide.stage import decide, prompt_only_arms
from evalkit.decide.words import num


@dataclass
class Rate:
    hits: int
    experiments: int

    @property
    def rate(self) -> float:
        return self.hits / self.experiments if self.experiments else float("nan")

    def ci95(self) -> tuple[float, float]:
        if not self.experiments:
            return float("nan"), float("nan")
        ci = sps.binomtest(self.hits, self.experiments).proportion_ci(0.95)
        return float(ci.low), float(ci.high)

    def words(self) -> str:
        lo, hi = self.ci95()
        return f"{self.rate:.1%} [{lo:.1%}, {hi:.1%}]"


@dataclass
class Row:
    """One comparison's calibration; rates are None where nothing could be calibrated (see ``note``)."""

    candidate: str
    metric: str
    role: str
    n_sessions: int
    false_pass: Rate | None = None  # success: ship at the min effect; guardrail: non-inferior at the margin
    false_drop: Rate | None = None
    power: Rate | None = None
    power_at: float | None = None  # the true (raw) difference the power was measured at
    expected_power: float | None = (
        None  # success: the configured power (the MDE's promise); guardrail: the run's
    )
    note: str = ""


@dataclass
class Calibration:
    run: str
    experiments: int
    resamples: int
    seed: int
    alpha: float
    power: float
    method: str
    interval: str = ""  # the decision interval by name: "95% session bootstrap-t, 10000 resamples, seed S"
    rows: list[Row] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        for r, row in zip(d["rows"], self.rows, strict=True):
            for k in ("false_pass", "false_drop", "power"):
                rate = getattr(row, k)
                r[k] = (
                    None if rate is None else {**asdict(rate), "rate": rate.rate, "ci95": list(rate.ci95())}
                )
        return d

    def markdown(self) -> str:
        return render(self.to_json())


def render(cal: dict) -> str:
    """Markdown tables per metric from ``calibration.json`` (also used by the report)."""

    def rate(r):
        if not r:
            return "n/a"
        return f"{r['rate']:.1%} [{r['ci95'][0]:.1%}, {r['ci95'][1]:.1%}]"

    a = cal["alpha"]
    out = [
        f"Decision interval: {cal.get('interval') or 'n/a'}; tests: {cal.get('method') or 'n/a'}.",
        "",
        f"Null experiments from the run's own differences (labels swapped within each matched session "
        f"event): {cal['experiments']} per comparison, {cal['resamples']} resamples and sign vectors per "
        f"test, seed {cal['seed']}, α {a:g}. Rates with binomial 95% ranges; false ship/pass and false drop should "
        f"be ≤ α = {a:.1%}. Power is measured on the run's own spread with the effect planted: for a "
        f"success metric at the MDE the run reports (expected: the configured {cal['power']:g}), for a "
        "guardrail at no change (expected: the power the run reports).",
        "",
    ]
    by_metric: dict[str, list[dict]] = {}
    for r in cal["rows"]:
        by_metric.setdefault(r["metric"], []).append(r)
    for metric, rows in by_metric.items():
        out += [
            f"**{metric}**",
            "",
            "| candidate | role | n | false ship / pass | false drop | power (at true difference) | expected power | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            at = f" at {num(r['power_at'], True)}" if r.get("power_at") is not None else ""
            rep = f"{r['expected_power']:.2f}" if r.get("expected_power") is not None else "n/a"
            out.append(
                f"| {r['candidate']} | {r['role']} | {r['n_sessions']} | {rate(r['false_pass'])} | "
                f"{rate(r['false_drop'])} | {rate(r['power'])}{at} | {rep} | {r['note'] or ''} |"
            )
        out.append("")
    return "\n".join(out)


def null_experiments(
    d: np.ndarray, g: np.ndarray, G: int, estimand: str, R: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(X, Y) of R null experiments: each matched event's difference gets a random sign."""
    n = np.bincount(g, minlength=G).astype(float)
    present = n > 0
    S = rng.integers(0, 2, size=(R, len(d))) * 2.0 - 1.0
    M = np.zeros((len(d), G))
    M[np.arange(len(d)), g] = 1.0
    sums = (S * d) @ M  # (R × G)
    if estimand == "session_mean":
        X = np.divide(sums, n, out=np.zeros_like(sums), where=present)
        Y = np.broadcast_to(present.astype(float), (R, G))
    else:
        X, Y = sums, np.broadcast_to(n, (R, G))
    keep = present
    return X[:, keep].T.copy(), Y[:, keep].T.copy()


def residual_experiments(
    d: np.ndarray, g: np.ndarray, G: int, estimand: str, R: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(X, Y) of R experiments with no effect and the run's own spread: each session's residual
    X_g − θ̂·Y_g gets a random sign (the power check plants an effect on these)."""
    n = np.bincount(g, minlength=G).astype(float)
    present = n > 0
    sums = np.bincount(g, weights=d, minlength=G)
    X = np.divide(sums, n, out=np.zeros(G), where=present) if estimand == "session_mean" else sums
    Y = present.astype(float) if estimand == "session_mean" else n
    u = (X - X.sum() / Y.sum() * Y)[present]
    S = rng.integers(0, 2, size=(present.sum(), R)) * 2.0 - 1.0
    return u[:, None] * S, np.repeat(Y[present][:, None], R, axis=1)


# Experiments tested at once. Experiments tested together share one set of sign vectors, which makes
# their outcomes correlated (the binomial range would understate the rate's noise): keep batches small.
CHUNK = 100


def _job(job: dict) -> dict:
    rng = np.random.default_rng(job["seed"])
    a, thr, R, sign = job["alpha"], job["threshold"], job["R"], job["sign"]
    success = job["role"] == "success"
    power_thr = (thr - job["mde"] if np.isfinite(job["mde"]) else None) if success else thr

    def hits(make, tests: list[tuple[float, str]]) -> list[int]:
        counts = [0] * len(tests)
        for start in range(0, R, CHUNK):
            X, Y = make(job["d"], job["g"], job["G"], job["estimand"], min(CHUNK, R - start), rng)
            est = stats.estimate(
                X, Y, a, job["resamples"], int(rng.integers(2**31)), interval=False, method=job["method"]
            )
            est = est.oriented(np.full(X.shape[1], sign))
            for i, (threshold, side) in enumerate(tests):
                counts[i] += int((stats.p_value(est, threshold, side) < a).sum())
        return counts

    # False rates: labels swapped within sessions (the run's own event-level differences, no effect).
    # Shifting such a null by c is testing it against threshold − c (see the module docstring).
    false_pass, false_drop = hits(null_experiments, [(0.0, "greater"), (0.0, "less")])
    # Power: the run's own residual spread with the effect planted (the MDE; a guardrail: no change).
    power = hits(residual_experiments, [(power_thr, "greater")])[0] if power_thr is not None else None
    return {"key": job["key"], "R": R, "false_pass": false_pass, "false_drop": false_drop, "power": power}


def calibrate_run(
    run_dir: str | os.PathLike,
    experiments: int = 1000,
    resamples: int | None = None,
    seed: int | None = None,
    workers: int | None = None,
    rules_file: str | None = None,
    progress: bool = True,
    out: str | os.PathLike | None = None,
) -> Calibration:
    """Calibrate the run's rules on its metrics table; writes ``calibration.json`` and ``calibration.md``
    into the run folder, or, with ``out``, the Markdown to ``out`` and the JSON beside it (the run
    folder untouched)."""
    from tqdm import tqdm

    from evalkit.contracts.runs import load_run

    loaded = load_run(run_dir)
    run = loaded.path
    if not loaded.paths.metrics.is_file():
        raise FileNotFoundError(f"{loaded.paths.metrics}: no metrics table (run the score stage first)")
    df = loaded.metrics
    config = loaded.config
    where = f"{loaded.paths.root / 'config.json'}: rules"
    rules: Rules = (
        read_rules_file(rules_file) if rules_file else resolve_rules(rules_table(config.get("rules"), where))
    )
    arms = list(config.get("replay", {}).get("arms", []))
    decision = decide(df, rules, arms, prompt_only_arms(config.get("model", {}).get("backend")))
    resamples = resamples or rules.resamples
    seed = rules.seed if seed is None else seed

    rows: list[Row] = []
    columns: list[tuple[str, str]] = []
    for cand, v in decision["verdicts"].items():
        for m, r in v["metrics"].items():
            expected = rules.power if r["role"] == "success" else r.get("power")
            row = Row(cand, m, r["role"], int(r["n_sessions"]), expected_power=expected)
            rows.append(row)
            if r["differing_sessions"] == 0:
                row.note = "no session differs: nothing to calibrate"
            elif r["n_sessions"] < 2:
                row.note = "fewer than 2 sessions"
            else:
                columns.append((cand, m))
    df = df.assign(arm=df["arm"].astype(str), metric=df["metric"].astype(str))
    paired = stats.paired_differences(df, columns, rules.baseline)
    G = len(paired.sessions)
    ss = np.random.SeedSequence(seed).generate_state(len(columns) + 1)
    jobs = []
    for k, (cand, m) in enumerate(columns):
        r = decision["verdicts"][cand]["metrics"][m]
        sign = rules.metrics[m].sign
        sel = paired.event_k == k
        mde = r.get("mde")
        jobs.append(
            {
                "key": (cand, m),
                "d": paired.event_d[sel],
                "g": paired.event_g[sel],
                "G": G,
                "estimand": rules.estimand,
                "R": experiments,
                "alpha": rules.alpha,
                "resamples": resamples,
                "method": rules.interval,
                "seed": int(ss[k]),
                "sign": float(sign),
                "role": r["role"],
                "threshold": sign * r["threshold"],
                "mde": sign * mde if mde is not None else float("nan"),
            }
        )
    by_key = {(r.candidate, r.metric): r for r in rows}
    workers = workers or os.cpu_count() or 1
    with ProcessPoolExecutor(min(workers, max(len(jobs), 1))) as pool:
        for res in tqdm(pool.map(_job, jobs), total=len(jobs), desc="calibrate", disable=not progress):
            row = by_key[res["key"]]
            row.false_pass = Rate(res["false_pass"], res["R"])
            row.false_drop = Rate(res["false_drop"], res["R"])
            m = decision["verdicts"][row.candidate]["metrics"][row.metric]
            if res["power"] is not None:
                row.power = Rate(res["power"], res["R"])
                row.power_at = m["mde"] if row.role == "success" else 0.0
            elif m.get("mde_exceeds_range"):
                row.note = "no reachable MDE (beyond the metric's range): no power to check"
    cal = Calibration(
        run=str(run),
        experiments=experiments,
        resamples=resamples,
        seed=seed,
        alpha=rules.alpha,
        power=rules.power,
        method=stats.METHOD,
        interval=bootstrap.label(rules.interval, 1 - 2 * rules.alpha, resamples, seed),
        rows=rows,
    )
    from evalkit.contracts.records import Calibration as CalibrationRecord
    from evalkit.contracts.runs import save_record

    md = Path(out) if out else run / "calibration.md"
    # The rules it was computed for: a re-decide under other rules drops it (drop_stale_calibration).
    save_record(
        md.with_suffix(".json"), CalibrationRecord, {**cal.to_json(), "rules_hash": rules_hash(rules)}
    )
    md.write_text(cal.markdown(), encoding="utf-8")
    return cal


def rules_hash(rules: Rules) -> str:
    """A digest of the rules as the decide stage applies them."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(asdict(rules), sort_keys=True, default=str).encode()).hexdigest()[:16]


def drop_stale_calibration(run: str | os.PathLike, rules: Rules) -> bool:
    """Remove the run's ``calibration.json``/``.md`` when they were computed for other rules (or
    do not say for which): after a rules-only re-decide they no longer describe the verdicts, and
    the report would show them as current. True when something was removed."""
    from evalkit.contracts.records import Calibration as CalibrationRecord
    from evalkit.contracts.runs import RunFolderError, RunPaths, read_record

    path = RunPaths(Path(run)).record(CalibrationRecord)
    if not path.is_file():
        return False
    try:
        current = read_record(run, CalibrationRecord).rules_hash == rules_hash(rules)
    except RunFolderError:  # unreadable or of another version: not current either
        current = False
    if current:
        return False
    path.unlink(missing_ok=True)
    path.with_suffix(".md").unlink(missing_ok=True)
    return True


__all__ = [
    "Calibration",
    "calibrate_run",
    "drop_stale_calibration",
    "null_experiments",
    "render",
    "rules_hash",
]
