"""Verdicts: the per-metric result of a comparison and the rule order untested → drop → ship → inconclusive."""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.decide.bootstrap import NAMES
from evalkit.decide.rules import Rules
from evalkit.decide.words import interval, num, pval

PROMPT_ONLY = "prompt-only change; the offline stand-in cannot judge it — run with a model"


@dataclass
class MetricResult:
    """One metric of one candidate against the baseline, in raw units of candidate − baseline."""

    metric: str
    role: str
    direction: str
    estimate: float
    ci: tuple[
        float, float
    ]  # the decision interval (session bootstrap); a verdict needs it beyond the threshold
    ci_sign_flip: tuple[float, float]  # the sign-flip test inverted, for comparison
    p_value: float  # success: superiority vs min effect; guardrail: non-inferiority vs margin
    p_worse: float  # success: worse than baseline; guardrail: worse than the margin
    threshold: float  # the difference p_value tests against (sign follows the direction)
    threshold_words: str
    mde: float  # true difference at which the test against `threshold` has the configured power
    headroom: float  # largest possible true difference in the better direction (0/1 metrics), else NaN
    power: float  # power of that test at `target`
    target: float
    sessions_needed: float  # sessions for that power at `target`
    n_sessions: int
    differing: int  # sessions whose difference is not zero
    unmatched: int
    unmatched_sessions: int
    lost_sessions: int  # sessions the baseline has and the candidate lacks
    errors: int  # candidate rows in error (NaN, error text, ±inf)
    rows: int
    base_errors: int
    base_rows: int
    degenerate: bool
    baseline_mean: float
    candidate_mean: float
    present: bool = True  # rows exist for this metric in both arms
    p_holm: float | None = None
    # The two requirements behind p_value and p_worse (each is the larger of its pair): the
    # bootstrap interval's own test and the sign-flip test.
    p_interval: float = float("nan")
    p_sign_flip: float = float("nan")
    p_worse_interval: float = float("nan")
    p_worse_sign_flip: float = float("nan")
    method: str = "bootstrap-t"  # which session bootstrap interval ``ci`` is

    def line(self, holm: bool = False) -> str:
        p = pval(self.p_holm, "p_holm") if holm and self.p_holm is not None else pval(self.p_value)
        return f"{self.metric} {num(self.estimate, True)} {interval(self.ci)}, {p} ({self.decided('main')})"

    def decided(self, test: str) -> str:
        """Which requirement gave the p-value of ``test`` ("main" or "worse") its value, in words."""
        boot, flip = (
            (self.p_interval, self.p_sign_flip)
            if test == "main"
            else (self.p_worse_interval, self.p_worse_sign_flip)
        )
        name = f"session {NAMES.get(self.method, self.method)}"
        if flip > boot:
            return (
                f"decided by the sign-flip test: {self.differing} of {self.n_sessions} sessions differ; "
                f"the {name} test alone {pval(boot)}"
            )
        return f"decided by the {name} interval's test; sign-flip {pval(flip)}"

    @property
    def mde_reachable(self) -> bool:
        """False when the MDE lies beyond the largest difference the metric's range allows."""
        return not (abs(self.headroom) < abs(self.mde) and (self.mde > 0) == (self.headroom > 0))

    def mde_words(self, power: float, what: str) -> str:
        """The MDE sentence, or why there is none: an unreachable MDE is not a number to plan with."""
        if self.mde_reachable:
            return f"{what} with power {power:g} when the true difference is {num(self.mde, True)}"
        return (
            f"no reachable MDE: to be {what} with power {power:g} the true difference would have to be "
            f"{num(self.mde, True)}, beyond the metric's range (at most {num(self.headroom, True)} "
            f"from the baseline's {num(self.baseline_mean)})"
        )

    def error_share(self) -> tuple[float, str]:
        """The larger of the candidate's and the baseline's scorer-error shares, and whose it is."""
        cand = self.errors / self.rows if self.rows else 0.0
        base = self.base_errors / self.base_rows if self.base_rows else 0.0
        return (cand, "candidate") if cand >= base else (base, "baseline")

    def to_json(self) -> dict:
        return {
            "role": self.role,
            "direction": self.direction,
            "estimate": self.estimate,
            "ci": list(self.ci),
            "ci_sign_flip": list(self.ci_sign_flip),
            "p_value": self.p_value,
            "p_worse": self.p_worse,
            "p_holm": self.p_holm,
            "p_interval": self.p_interval,
            "p_sign_flip": self.p_sign_flip,
            "p_worse_interval": self.p_worse_interval,
            "p_worse_sign_flip": self.p_worse_sign_flip,
            "decided_by": "sign-flip" if self.p_sign_flip > self.p_interval else "interval",
            "worse_decided_by": "sign-flip" if self.p_worse_sign_flip > self.p_worse_interval else "interval",
            "threshold": self.threshold,
            "mde": self.mde if self.mde_reachable else None,
            "mde_exceeds_range": not self.mde_reachable,
            "mde_needed": self.mde,
            "headroom": self.headroom,
            "power": self.power,
            "target": self.target,
            "sessions_needed": self.sessions_needed,
            "n_sessions": self.n_sessions,
            "differing_sessions": self.differing,
            "unmatched": self.unmatched,
            "unmatched_sessions": self.unmatched_sessions,
            "lost_sessions": self.lost_sessions,
            "errors": self.errors,
            "rows": self.rows,
            "baseline_errors": self.base_errors,
            "baseline_rows": self.base_rows,
            "degenerate": self.degenerate,
            "baseline_mean": self.baseline_mean,
            "candidate_mean": self.candidate_mean,
        }


@dataclass
class Verdict:
    verdict: str
    reason: str
    deciding_metric: str | None
    n_sessions: int  # sessions of the deciding metric (each metric has its own n)
    metrics: dict[str, MetricResult]
    lost_sessions: int = 0
    # The p-value of the test the reason cites, and which test it is: a report prints this one
    # beside the verdict (a metric's other p-values belong to other tests). None: no test decided.
    deciding_p: float | None = None
    deciding_test: str | None = None

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "deciding_metric": self.deciding_metric,
            "n_sessions": self.n_sessions,
            "lost_sessions": self.lost_sessions,
            "deciding_p": self.deciding_p,
            "deciding_test": self.deciding_test,
            "metrics": {m: r.to_json() for m, r in self.metrics.items() if r.present},
        }


def untested_reason(
    cand: str, results: dict[str, MetricResult], success: tuple, rules: Rules, prompt_only: bool = False
) -> tuple[str, str] | None:
    """(reason, metric) for the first failing precondition, or None when the candidate can be judged.

    Only success metrics need ``min_sessions``: a guardrail that applies to few sessions blocks a
    ship (see :func:`judge`) but does not make the candidate untested.
    """
    for m, r in results.items():
        if not r.present:
            return (
                f"untested: metric {m} missing from the metrics table (needed for {cand} or {rules.baseline})",
                m,
            )
    for m, r in results.items():
        share, whose = r.error_share()
        if share > rules.max_error_share:
            errs, rows = (r.errors, r.rows) if whose == "candidate" else (r.base_errors, r.base_rows)
            return (
                f"untested: {m} scorer errors in the {whose} arm {errs}/{rows} values ({share:.0%}) "
                f"> max_error_share {rules.max_error_share:.0%}",
                m,
            )
    for m in success:
        r = results[m]
        if r.n_sessions < rules.min_sessions:
            return f"untested: {m} has {r.n_sessions} matched sessions < min_sessions {rules.min_sessions}", m
    if all(results[m].differing == 0 for m in success):
        m = success[0]
        same = "; ".join(
            f"{s}: every value is {num(results[s].baseline_mean)} in both arms"
            if results[s].degenerate
            else f"{s}: 0 of {results[s].n_sessions}"
            for s in success
        )
        why = f"; {PROMPT_ONLY}" if prompt_only else ""
        return f"untested: no session differs from the baseline ({same}){why}", m
    return None


def judge(
    cand: str, results: dict[str, MetricResult], success: tuple, guards: tuple, rules: Rules
) -> Verdict:
    """Apply the verdict order drop → ship → inconclusive to a candidate that passed the untested checks."""
    a = rules.alpha
    lost = max((r.lost_sessions for r in results.values()), default=0)

    def v(verdict, reason, metric, p, test):
        return Verdict(verdict, reason, metric, results[metric].n_sessions, results, lost, p, test)

    worse = [results[m] for m in success if results[m].p_worse < a]
    if worse:
        r = min(worse, key=lambda r: r.p_worse)
        return v(
            "drop",
            f"drop: success metric {r.metric} {num(r.estimate, True)} {interval(r.ci)} is significantly worse "
            f"than {rules.baseline} ({pval(r.p_worse)} < α {a:g}, {r.decided('worse')}; {r.direction} is better)",
            r.metric,
            r.p_worse,
            "worse than baseline",
        )
    broken = [results[m] for m in guards if results[m].p_worse < a]
    if broken:
        r = min(broken, key=lambda r: r.p_worse)
        return v(
            "drop",
            f"drop: guardrail {r.metric} {num(r.estimate, True)} {interval(r.ci)} is significantly worse than its "
            f"margin {num(r.threshold, True)}{r.threshold_words} ({pval(r.p_worse)} < α {a:g}, {r.decided('worse')})",
            r.metric,
            r.p_worse,
            "worse than margin",
        )
    # A lost session is the candidate's failure: k lost sessions against none in the baseline is
    # a sign-flip test whose exact p-value is 2^−k.
    first = success[0]
    if lost and 0.5**lost < a:
        return v(
            "drop",
            f"drop: {cand} lost {lost} sessions that {rules.baseline} has (a lost session is a failure; "
            f"sign-flip {pval(0.5**lost)} < α {a:g})",
            first,
            0.5**lost,
            "sign-flip on lost sessions",
        )
    wins = sorted((results[m] for m in success if results[m].p_holm < a), key=lambda r: r.p_holm)
    thin = [results[m] for m in guards if results[m].n_sessions < rules.min_sessions]
    not_ni = [
        results[m] for m in guards if results[m].p_value >= a and results[m].n_sessions >= rules.min_sessions
    ]
    if wins and not guards:
        # A success metric alone cannot show the candidate breaks nothing else: it never ships.
        return v(
            "untested",
            f"untested: {wins[0].line(holm=True)} is significant, but {cand} has no guardrail, so nothing "
            "checks what it may break; list guardrails in [rules] (an experiment's rules extend the "
            "project's unless inherit = false)",
            wins[0].metric,
            None,  # no test decided it: the missing guardrail did
            None,
        )
    if wins and not not_ni and not thin and not lost:
        r = wins[0]
        guard_words = "; guardrails non-inferior: " + ", ".join(
            f"{g} {interval(results[g].ci)} within {num(results[g].threshold, True)}" for g in guards
        )
        return v(
            "ship",
            f"ship: {r.line(holm=True)} < α {a:g}, beyond min effect {num(r.threshold, True)}"
            f"{r.threshold_words}{guard_words}",
            r.metric,
            r.p_holm,
            "Holm-adjusted, beyond min effect",
        )
    if wins:
        if lost:
            return v(
                "inconclusive",
                f"inconclusive: {wins[0].line(holm=True)} is significant, but {cand} lost {lost} sessions that "
                f"{rules.baseline} has (a lost session is a failure; sign-flip {pval(0.5**lost)} ≥ α {a:g})",
                wins[0].metric,
                0.5**lost,
                "sign-flip on lost sessions",
            )
        if thin:
            g = thin[0]
            return v(
                "inconclusive",
                f"inconclusive: {wins[0].line(holm=True)} is significant, but guardrail {g.metric} has only "
                f"{g.n_sessions} sessions < min_sessions {rules.min_sessions}: it cannot be shown within its margin",
                g.metric,
                None,
                None,
            )
        g = max(not_ni, key=lambda r: r.p_value)
        return v(
            "inconclusive",
            f"inconclusive: {wins[0].line(holm=True)} is significant, but guardrail {g.metric} "
            f"{num(g.estimate, True)} {interval(g.ci)} is not shown within its margin {num(g.threshold, True)}"
            f"{g.threshold_words} ({pval(g.p_value)} ≥ α {a:g}, {g.decided('main')}; "
            f"{g.mde_words(rules.power, 'shown within it')})",
            g.metric,
            g.p_value,
            "within margin",
        )
    r = min((results[m] for m in success), key=lambda r: r.p_holm)
    return v(
        "inconclusive",
        f"inconclusive: no success metric significantly beyond its min effect; best is {r.line(holm=True)} "
        f"≥ α {a:g} against min effect {num(r.threshold, True)}{r.threshold_words}; "
        + (
            f"MDE {num(r.mde, True)} (ships with power {rules.power:g} at that true effect)"
            if r.mde_reachable
            else r.mde_words(rules.power, "shipped")
        )
        + f" with {r.n_sessions} sessions; "
        f"{num(r.sessions_needed)} needed for {num(r.target, True)}",
        r.metric,
        r.p_holm,
        "Holm-adjusted, beyond min effect",
    )
