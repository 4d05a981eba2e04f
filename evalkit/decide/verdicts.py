"""Verdicts: the per-metric result of a comparison and the rule order untested → drop → ship → inconclusive."""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.decide.rules import Rules
from evalkit.decide.words import interval, num, pval


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
