"""Decide stage: paired statistics per candidate and metric, then ship rules into verdicts.

Writes ``decision.json`` (contract in ``docs/contracts.md``): the ``summary`` table (per arm and
metric, the mean of session means), ``stats`` (method, resamples, seed, α, estimand, unit),
``noise_floor`` (the A/A arm against the baseline) and ``verdicts`` per candidate, each with the
rule and numbers that decided it in words.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evalkit import stats
from evalkit.config import Experiment
from evalkit.corpus import write_json
from evalkit.metrics import read_metrics
from evalkit.rules import Rules, resolve_rules


def summarize_metrics(df) -> list[dict]:
    """Per (arm, metric): sessions, values, errors, and the mean of per-session means."""
    ok = df[df["error"].isna()]
    per_session = ok.groupby(["arm", "metric", "session"], observed=True)["value"].mean().reset_index()
    agg = per_session.groupby(["arm", "metric"], observed=True)["value"].agg(["count", "mean"]).reset_index()
    errors = df[df["error"].notna()].groupby(["arm", "metric"], observed=True).size()
    values = df.groupby(["arm", "metric"], observed=True).size()
    out = []
    for r in agg.itertuples(index=False):
        out.append(
            {
                "arm": r.arm,
                "metric": r.metric,
                "sessions": int(r.count),
                "mean": float(r.mean),
                "values": int(values.get((r.arm, r.metric), 0)),
                "errors": int(errors.get((r.arm, r.metric), 0)),
            }
        )
    return out


# --------------------------------------------------------------------------- words


def num(x: float | None, signed: bool = False) -> str:
    """A number as a reader wants it: 3 significant digits, no exponent for everyday magnitudes."""
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    s = f"{x:+,.0f}" if abs(x) >= 1000 else f"{x:+.3g}" if abs(x) >= 1e-3 else f"{x:+.2e}"
    return s if signed else s.lstrip("+")


def pval(p: float, name: str = "p") -> str:
    return f"{name}<0.001" if p < 0.001 else f"{name}={p:.3f}"


def interval(ci) -> str:
    return f"[{num(ci[0])}, {num(ci[1])}]"


# --------------------------------------------------------------------------- judging


@dataclass
class MetricResult:
    """One metric of one candidate against the baseline, in raw units of candidate − baseline."""

    metric: str
    role: str
    direction: str
    estimate: float
    ci: tuple[float, float]
    ci_t: tuple[float, float]
    ci_bca: tuple[float, float]
    bca: str
    p_value: float  # success: superiority vs min effect; guardrail: non-inferiority vs margin
    p_worse: float  # success: worse than baseline; guardrail: worse than the margin
    threshold: float  # the difference p_value tests against (sign follows the direction)
    threshold_words: str
    mde: float
    power: float
    target: float
    sessions_needed: float
    n_sessions: int
    unmatched: int
    unmatched_sessions: int
    errors: int
    rows: int
    degenerate: bool
    baseline_mean: float
    candidate_mean: float
    present: bool = True  # rows exist for this metric in both arms
    p_holm: float | None = None

    def line(self, holm: bool = False) -> str:
        p = pval(self.p_holm, "p_holm") if holm and self.p_holm is not None else pval(self.p_value)
        return f"{self.metric} {num(self.estimate, True)} {interval(self.ci)}, {p}"

    def to_json(self) -> dict:
        return {
            "role": self.role,
            "direction": self.direction,
            "estimate": self.estimate,
            "ci": list(self.ci),
            "ci_t": list(self.ci_t),
            "ci_bca": list(self.ci_bca),
            "bca": self.bca or "BCa",
            "p_value": self.p_value,
            "p_worse": self.p_worse,
            "p_holm": self.p_holm,
            "threshold": self.threshold,
            "mde": self.mde,
            "power": self.power,
            "target": self.target,
            "sessions_needed": self.sessions_needed,
            "n_sessions": self.n_sessions,
            "unmatched": self.unmatched,
            "unmatched_sessions": self.unmatched_sessions,
            "errors": self.errors,
            "degenerate": self.degenerate,
            "baseline_mean": self.baseline_mean,
            "candidate_mean": self.candidate_mean,
        }


@dataclass
class Verdict:
    verdict: str
    reason: str
    deciding_metric: str | None
    n_sessions: int
    metrics: dict[str, MetricResult]

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "deciding_metric": self.deciding_metric,
            "n_sessions": self.n_sessions,
            "metrics": {m: r.to_json() for m, r in self.metrics.items() if r.present},
        }


def untested_reason(cand: str, results: dict[str, MetricResult], success: tuple, rules: Rules):
    """(reason, metric) for the first failing precondition, or None when the candidate can be judged."""
    for m, r in results.items():
        if not r.present:
            return f"untested: metric {m} missing from the metrics table (needed for {cand} or {rules.baseline})", m
    for m, r in results.items():
        if r.n_sessions < rules.min_sessions:
            return (
                f"untested: {m} has {r.n_sessions} matched sessions < min_sessions {rules.min_sessions}",
                m,
            )
    for m, r in results.items():
        share = r.errors / r.rows if r.rows else 0.0
        if share > rules.max_error_share:
            return (
                f"untested: {m} scorer errors {r.errors}/{r.rows} values ({share:.0%}) "
                f"> max_error_share {rules.max_error_share:.0%}",
                m,
            )
    for m in success:
        if results[m].degenerate:
            v = results[m].baseline_mean
            return f"untested: success metric {m} is degenerate (every value is {num(v)} in both arms)", m
    return None


def judge(cand: str, results: dict[str, MetricResult], success: tuple, guards: tuple, rules: Rules) -> Verdict:
    """Apply the verdict order drop → ship → inconclusive to a candidate that passed the untested checks."""
    a = rules.alpha
    n = min(r.n_sessions for r in results.values())

    def v(verdict, reason, metric):
        return Verdict(verdict, reason, metric, n, results)

    worse = [results[m] for m in success if results[m].p_worse < a]
    if worse:
        r = min(worse, key=lambda r: r.p_worse)
        return v(
            "drop",
            f"drop: success metric {r.metric} {num(r.estimate, True)} {interval(r.ci)} is significantly worse "
            f"than {rules.baseline} ({pval(r.p_worse)} < α {a:g}; {r.direction} is better)",
            r.metric,
        )
    broken = [results[m] for m in guards if results[m].p_worse < a]
    if broken:
        r = min(broken, key=lambda r: r.p_worse)
        return v(
            "drop",
            f"drop: guardrail {r.metric} {num(r.estimate, True)} {interval(r.ci)} is significantly worse than its "
            f"margin {num(r.threshold, True)}{r.threshold_words} ({pval(r.p_worse)} < α {a:g})",
            r.metric,
        )
    wins = sorted((results[m] for m in success if results[m].p_holm < a), key=lambda r: r.p_holm)
    not_ni = [results[m] for m in guards if results[m].p_value >= a]
    if wins and not not_ni:
        r = wins[0]
        guard_words = (
            "; guardrails non-inferior: "
            + ", ".join(f"{g} {interval(results[g].ci)} within {num(results[g].threshold, True)}" for g in guards)
            if guards
            else "; no guardrails"
        )
        return v(
            "ship",
            f"ship: {r.line(holm=True)} < α {a:g}, beyond min effect {num(r.threshold, True)}"
            f"{r.threshold_words}{guard_words}",
            r.metric,
        )
    if wins:
        g = max(not_ni, key=lambda r: r.p_value)
        return v(
            "inconclusive",
            f"inconclusive: {wins[0].line(holm=True)} is significant, but guardrail {g.metric} "
            f"{num(g.estimate, True)} {interval(g.ci)} is not shown within its margin {num(g.threshold, True)}"
            f"{g.threshold_words} ({pval(g.p_value)} ≥ α {a:g}, MDE {num(g.mde)})",
            g.metric,
        )
    r = min((results[m] for m in success), key=lambda r: r.p_holm)
    return v(
        "inconclusive",
        f"inconclusive: no success metric significantly beyond its min effect; best is {r.line(holm=True)} "
        f"≥ α {a:g} against min effect {num(r.threshold, True)}{r.threshold_words}; MDE {num(r.mde)} "
        f"with {r.n_sessions} sessions, {num(r.sessions_needed)} needed for {num(r.target)} at power {rules.power:g}",
        r.metric,
    )


# --------------------------------------------------------------------------- the stage


def candidate_arms(df: pd.DataFrame, rules: Rules, configured: list[str] | None) -> list[str]:
    """Candidates to judge: the configured arms (even without rows: then untested) and any others in the table."""
    seen = list(dict.fromkeys([*(configured or []), *sorted(df["arm"].astype(str).unique())]))
    return [a for a in seen if a not in (rules.baseline, rules.aa)]


def decide(df: pd.DataFrame, rules: Rules, arms: list[str] | None = None) -> dict:
    """Statistics, noise floor and verdicts for every candidate (the decision minus its summary)."""
    df = df.assign(arm=df["arm"].astype(str), metric=df["metric"].astype(str))
    pairs = df[["arm", "metric"]].drop_duplicates()
    present = set(zip(pairs["arm"].tolist(), pairs["metric"].tolist(), strict=True))
    metrics_in_table = sorted(pairs["metric"].unique())
    arms_in_table = set(pairs["arm"].unique())
    cands = candidate_arms(df, rules, arms)
    plans: dict[str, tuple] = {}
    columns: list[tuple[str, str]] = []
    for c in cands:
        rule = rules.for_candidate(c)
        if rule is None or not rule.success:
            plans[c] = (None, (), ())
            continue
        plans[c] = (rule, rule.success, rule.guardrails)
        columns += [(c, m) for m in (*rule.success, *rule.guardrails)]
    aa_cols = [(rules.aa, m) for m in metrics_in_table] if rules.aa in arms_in_table else []
    columns += aa_cols

    paired = stats.paired_differences(df, columns, rules.baseline)
    X, Y = stats.estimand_matrices(paired.diff_sum, paired.count, rules.estimand)
    est = stats.estimate(X, Y, rules.alpha, rules.resamples, rules.seed, expanded=rules.interval == "expanded")
    bx, by = stats.estimand_matrices(paired.base_sum, paired.count, rules.estimand)
    cx, _ = stats.estimand_matrices(paired.cand_sum, paired.count, rules.estimand)
    with np.errstate(invalid="ignore", divide="ignore"):
        base_mean = bx.sum(0) / by.sum(0)
        cand_mean = cx.sum(0) / by.sum(0)

    # Orient every column so that "greater" means better, then test all columns at once.
    K = len(columns)
    sign = np.ones(K)
    thr_o = np.zeros(K)  # threshold of the main test, oriented (better is positive)
    roles = [""] * K
    words = [""] * K
    target = np.full(K, np.nan)
    k_of = {c: k for k, c in enumerate(columns)}
    for c, (_rule, success, guards) in plans.items():
        for m in (*success, *guards):
            k = k_of[(c, m)]
            mr = rules.metrics[m]
            sign[k] = mr.sign
            bm = base_mean[k] if np.isfinite(base_mean[k]) else 0.0
            if m in success:
                roles[k], amt = "success", mr.min_effect
                thr_o[k] = amt.resolve(bm)
            else:
                roles[k], amt = "guardrail", mr.margin
                thr_o[k] = -amt.resolve(bm)
            words[k] = f" ({amt.describe()} {num(bm)})" if amt.relative else ""
            tgt = (mr.target or amt).resolve(bm)
            target[k] = tgt if tgt > 0 else np.nan
    oriented = dataclasses.replace(est, boot=est.boot * sign)
    # Success: H0 better ≤ min effect. Guardrail: H0 better ≤ −margin (non-inferiority).
    p_main = stats.p_value(oriented, thr_o, "greater")
    # Success: significantly worse than baseline (H0 better ≥ 0). Guardrail: worse than the margin.
    p_worse = stats.p_value(oriented, np.where(np.array(roles) == "success", 0.0, thr_o), "less")
    mde = stats.mde(est.se, rules.alpha, rules.power)
    power = stats.achieved_power(target, est.se, rules.alpha)
    needed = stats.sessions_needed(target, est.se, est.n_sessions, rules.alpha, rules.power)

    def result(c: str, m: str) -> MetricResult:
        k = k_of[(c, m)]
        mr = rules.metrics[m]
        return MetricResult(
            metric=m,
            role=roles[k],
            direction=mr.direction,
            estimate=float(est.estimate[k]),
            ci=tuple(est.ci[k]),
            ci_t=tuple(est.ci_t[k]),
            ci_bca=tuple(est.ci_bca[k]),
            bca=est.bca_note[k],
            p_value=float(p_main[k]),
            p_worse=float(p_worse[k]),
            threshold=float(sign[k] * thr_o[k]),
            threshold_words=words[k],
            mde=float(mde[k]),
            power=float(power[k]),
            target=float(target[k]),
            sessions_needed=float(needed[k]),
            n_sessions=int(est.n_sessions[k]),
            unmatched=int(paired.unmatched[k]),
            unmatched_sessions=int(paired.unmatched_sessions[k]),
            errors=int(paired.errors[k]),
            rows=int(paired.rows[k]),
            degenerate=bool(paired.degenerate[k]),
            baseline_mean=float(base_mean[k]),
            candidate_mean=float(cand_mean[k]),
            present=(c, m) in present and (rules.baseline, m) in present,
        )

    verdicts: dict[str, Verdict] = {}
    pending: dict[str, tuple] = {}
    for c, (rule, success, guards) in plans.items():
        if c not in arms_in_table:
            verdicts[c] = Verdict("untested", f"untested: arm {c} has no rows in the metrics table", None, 0, {})
            continue
        if rule is None:
            verdicts[c] = Verdict(
                "untested", f"untested: no ship rule declares success metrics for {c} ({rules.source})", None, 0, {}
            )
            continue
        results = {m: result(c, m) for m in (*success, *guards)}
        n = min((r.n_sessions for r in results.values()), default=0)
        if rules.baseline not in arms_in_table:
            verdicts[c] = Verdict(
                "untested", f"untested: baseline arm {rules.baseline} has no rows in the metrics table", None, 0, results
            )
            continue
        why = untested_reason(c, results, success, rules)
        if why:
            verdicts[c] = Verdict("untested", why[0], why[1], n, results)
            continue
        pending[c] = (results, success, guards)

    # Holm across every judged candidate × its success metrics: one family, as the rule promises.
    family = [(c, m) for c, (_, success, _) in pending.items() for m in success]
    adjusted = stats.holm([pending[c][0][m].p_value for c, m in family])
    for (c, m), p in zip(family, adjusted, strict=True):
        pending[c][0][m].p_holm = float(p)
    for c, (results, success, guards) in pending.items():
        verdicts[c] = judge(c, results, success, guards, rules)

    noise: dict[str, dict] = {}
    for col in aa_cols:
        k = k_of[col]
        if est.n_sessions[k] == 0:
            continue
        zero = bool(np.all(paired.diff_sum[:, k] == 0) and np.all(est.boot[:, k][np.isfinite(est.boot[:, k])] == 0))
        noise[col[1]] = {
            "aa_estimate": float(est.estimate[k]),
            "ci": list(est.ci[k]),
            "n_sessions": int(est.n_sessions[k]),
            "exactly_zero": zero,
        }
    decision = {
        "stats": {
            "method": stats.METHODS[rules.interval == "expanded"],
            "resamples": rules.resamples,
            "seed": rules.seed,
            "alpha": rules.alpha,
            "ci_level": 1 - 2 * rules.alpha,
            "power": rules.power,
            "min_sessions": rules.min_sessions,
            "estimand": stats.ESTIMANDS[rules.estimand],
            "unit": "session",
            "rules": rules.source,
        },
        "noise_floor": noise,
        "noise_note": noise_note(noise, rules.aa),
        "verdicts": {c: verdicts[c].to_json() for c in cands},
    }
    return finite(decision)


def noise_note(noise: dict, aa: str) -> str:
    if not noise:
        return f"no A/A arm ({aa}) in this run: the noise floor was not measured"
    if all(v["exactly_zero"] for v in noise.values()):
        return (
            f"A/A arm ({aa}) equals the baseline exactly on every metric: the backend is deterministic, "
            "so the noise floor is exactly zero"
        )
    moved = sorted(m for m, v in noise.items() if not v["exactly_zero"])
    return f"A/A arm ({aa}) differs from the baseline on {', '.join(moved)}: replicate noise, see each interval"


def finite(obj):
    """Plain JSON types with every non-finite float as null (decision.json never holds NaN)."""
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return float(obj) if math.isfinite(obj) else None
    return obj


def decide_run(run_dir: str | os.PathLike, exp: Experiment, rules: Rules | None = None) -> dict:
    """The decide stage: read ``metrics.parquet``, write ``decision.json``."""
    run = Path(run_dir)
    df = read_metrics(run / "metrics.parquet")
    rules = rules or resolve_rules(exp.section("rules"), exp.root)
    decision = {"summary": summarize_metrics(df), **decide(df, rules, list(exp.section("replay").get("arms", [])))}
    write_json(run / "decision.json", decision)
    return decision
