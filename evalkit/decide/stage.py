"""Decide stage: paired statistics per candidate and metric, then ship rules into verdicts.

Writes ``decision.json`` (contract in ``docs/contracts.md``): ``stats`` (method, resamples, seed, α, estimand, unit),
``noise_floor`` (the A/A arm against the baseline) and ``verdicts`` per candidate, each with the
rule and numbers that decided it in words.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.contracts import aggregate
from evalkit.contracts.config import Experiment
from evalkit.contracts.metrics_stream import session_chunks
from evalkit.contracts.records import Decision as DecisionRecord
from evalkit.contracts.runs import RunPaths, write_record
from evalkit.decide import bootstrap, design, stats
from evalkit.decide.noise import NoiseCells, noise_note
from evalkit.decide.pairing import combine
from evalkit.decide.rules import Rules, resolve_rules
from evalkit.decide.verdicts import MetricResult, Verdict, judge, untested_reason
from evalkit.decide.words import num

# --------------------------------------------------------------------------- the stage


# The exams' yardsticks (evalkit.score.examcheck): the ceiling and the floor are references, not candidates.
REFERENCE_ARMS = ("uncompacted", "no-history")


def candidate_arms(in_table: set[str], rules: Rules, configured: list[str] | None) -> list[str]:
    """Candidates to judge: the configured arms (even without rows: then untested) and any others
    in the table, but the baseline, the A/A arm and the exams' ceiling and floor."""
    seen = list(dict.fromkeys([*(configured or []), *sorted(in_table)]))
    return [a for a in seen if a not in (rules.baseline, rules.aa, *REFERENCE_ARMS)]


def decide(
    df: pd.DataFrame,
    rules: Rules,
    arms: list[str] | None = None,
    prompt_only: Callable[[str], bool] | None = None,
) -> dict:
    """Statistics, noise floor and verdicts for every candidate (the decision minus its summary).

    ``prompt_only(arm)`` says whether an arm changes only text a model reads while the run's backend
    is an offline stand-in: such an arm identical to the baseline is untested for that reason.
    """
    agg = aggregate.of_frame(df)
    return decide_chunks([df], aggregate.pairs(agg), rules, arms, prompt_only, aggregate.zero_one(agg))


def decide_chunks(
    frames: Iterable[pd.DataFrame],
    present: set[tuple[str, str]],
    rules: Rules,
    arms: list[str] | None = None,
    prompt_only: Callable[[str], bool] | None = None,
    zero_one: set[str] | None = None,
) -> dict:
    """:func:`decide` over a table given as frames of whole sessions, in one pass holding one
    frame at a time; ``present`` is the table's (arm, metric) pairs (they choose the columns
    before the pass) and ``zero_one`` its metrics whose every value is 0 or 1 (both from the run's
    aggregate, :mod:`evalkit.contracts.aggregate`)."""
    metrics_in_table = sorted({m for _, m in present})
    arms_in_table = {a for a, _ in present}
    cands = candidate_arms(arms_in_table, rules, arms)
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

    parts, noise_cells = [], NoiseCells(aa_cols, rules)
    for df in frames:
        parts.append(stats.paired_differences(df, columns, rules.baseline).without_events())
        noise_cells.add(df)
    paired = combine(parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        bx, by = stats.estimand_matrices(paired.base_sum, paired.count, rules.estimand)
        base_mean = bx.sum(0) / by.sum(0)
        del bx
        cx, _ = stats.estimand_matrices(paired.cand_sum, paired.count, rules.estimand)
        cand_mean = cx.sum(0) / by.sum(0)
        del cx, by
    X, Y = stats.estimand_matrices(paired.diff_sum, paired.count, rules.estimand)
    paired = paired.column_totals()
    est = stats.estimate(X, Y, rules.alpha, rules.resamples, rules.seed, method=rules.interval)

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
            # Design target (oriented true effect): the rule's target, else twice the min effect for
            # a success metric; a guardrail's is "no change" (can it be shown within its margin?).
            if m in success:
                target[k] = mr.target.resolve(bm) if mr.target else (2 * thr_o[k] if thr_o[k] > 0 else np.nan)
            else:
                target[k] = 0.0
    oriented = est.oriented(sign)
    # Success: H0 better ≤ min effect. Guardrail: H0 better ≤ −margin (non-inferiority).
    # Each is the larger of the bootstrap interval's own test and the sign-flip test (stats.p_value).
    p_main = stats.p_value(oriented, thr_o, "greater")
    main_parts = stats.interval_p(oriented, thr_o, "greater"), stats.sign_flip_p(oriented, thr_o, "greater")
    # Success: significantly worse than baseline (H0 better ≥ 0). Guardrail: worse than the margin.
    thr_worse = np.where(np.array(roles) == "success", 0.0, thr_o)
    p_worse = stats.p_value(oriented, thr_worse, "less")
    worse_parts = (
        stats.interval_p(oriented, thr_worse, "less"),
        stats.sign_flip_p(oriented, thr_worse, "less"),
    )
    # Design numbers against the same null and with the same critical value as the test itself.
    n = est.n_sessions
    se = design.design_se(est)  # median-unbiased: the MDE a typical run reports keeps its power
    # A skewed metric's bootstrap-t critical value can exceed the sign-flip test's: plan with the larger.
    crit = bootstrap.critical(oriented.draws, rules.alpha) if rules.interval == "bootstrap-t" else None
    mde = sign * design.mde(se, n, rules.alpha, rules.power, thr_o, crit)
    # A 0/1 metric's mean cannot leave [0, 1]: the largest possible improvement bounds the MDE.
    zero_one = zero_one or set()
    headroom = np.array([np.nan] * K)
    for k, (_c, m) in enumerate(columns):
        if m in zero_one and np.isfinite(base_mean[k]):
            headroom[k] = (1.0 - base_mean[k]) if sign[k] > 0 else -base_mean[k]
    power = design.achieved_power(target, se, n, rules.alpha, thr_o, crit)
    needed = design.sessions_needed(target, se, n, rules.alpha, rules.power, thr_o)

    def result(c: str, m: str) -> MetricResult:
        k = k_of[(c, m)]
        mr = rules.metrics[m]
        return MetricResult(
            metric=m,
            role=roles[k],
            direction=mr.direction,
            estimate=float(est.estimate[k]),
            ci=tuple(est.ci[k]),
            ci_sign_flip=tuple(est.ci_sign_flip[k]),
            p_value=float(p_main[k]),
            p_worse=float(p_worse[k]),
            p_interval=float(main_parts[0][k]),
            p_sign_flip=float(main_parts[1][k]),
            p_worse_interval=float(worse_parts[0][k]),
            p_worse_sign_flip=float(worse_parts[1][k]),
            method=rules.interval,
            threshold=float(sign[k] * thr_o[k]),
            threshold_words=words[k],
            mde=float(mde[k]),
            headroom=float(headroom[k]),
            power=float(power[k]),
            target=float(sign[k] * target[k]),
            sessions_needed=float(needed[k]),
            n_sessions=int(est.n_sessions[k]),
            differing=int(est.differing[k]),
            unmatched=int(paired.unmatched[k]),
            unmatched_sessions=int(paired.unmatched_sessions[k]),
            lost_sessions=int(paired.lost_sessions[k]),
            errors=int(paired.errors[k]),
            rows=int(paired.rows[k]),
            base_errors=int(paired.base_errors[k]),
            base_rows=int(paired.base_rows[k]),
            degenerate=bool(paired.degenerate[k]),
            baseline_mean=float(base_mean[k]),
            candidate_mean=float(cand_mean[k]),
            present=(c, m) in present and (rules.baseline, m) in present,
        )

    verdicts: dict[str, Verdict] = {}
    pending: dict[str, tuple] = {}
    for c, (rule, success, guards) in plans.items():
        if c not in arms_in_table:
            verdicts[c] = Verdict(
                "untested", f"untested: arm {c} has no rows in the metrics table", None, 0, {}
            )
            continue
        if rule is None:
            verdicts[c] = Verdict(
                "untested",
                f"untested: no ship rule declares success metrics for {c} ({rules.source})",
                None,
                0,
                {},
            )
            continue
        results = {m: result(c, m) for m in (*success, *guards)}
        if rules.baseline not in arms_in_table:
            verdicts[c] = Verdict(
                "untested",
                f"untested: baseline arm {rules.baseline} has no rows in the metrics table",
                None,
                0,
                results,
            )
            continue
        why = untested_reason(c, results, success, rules, bool(prompt_only and prompt_only(c)))
        if why:
            verdicts[c] = Verdict("untested", why[0], why[1], results[why[1]].n_sessions, results)
            continue
        pending[c] = (results, success, guards)

    # Holm across every judged candidate × its success metrics: one family, as the rule promises.
    family = [(c, m) for c, (_, success, _) in pending.items() for m in success]
    adjusted = stats.holm([pending[c][0][m].p_value for c, m in family])
    for (c, m), p in zip(family, adjusted, strict=True):
        pending[c][0][m].p_holm = float(p)
    for c, (results, success, guards) in pending.items():
        verdicts[c] = judge(c, results, success, guards, rules)

    noise = noise_cells.floor()
    decision = {
        "stats": {
            "method": stats.METHOD,
            "interval": bootstrap.label(rules.interval, 1 - 2 * rules.alpha, rules.resamples, rules.seed),
            "printed_interval": rules.interval,
            "ci_sign_flip": "the sign-flip test inverted, for comparison (not printed)",
            "noise_floor_interval": "clustered-SE t on G − 1 df (no resampling: one column per metric)",
            "exact_max": stats.EXACT_MAX,
            "resamples": rules.resamples,
            "sign_vectors": int(est.FX.shape[0]),
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


def summarize_metrics(df: pd.DataFrame) -> list[dict]:
    """Per (arm, metric) of a metrics frame: sessions, values, errors, and the mean of per-session means."""
    return aggregate.summary(aggregate.of_frame(df))


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


def prompt_only_arms(backend: str | None) -> Callable[[str], bool] | None:
    """With an offline stand-in backend, a test for arms whose every part is flagged ``prompt_only``
    in the candidate registry; None with a real model (then a prompt change can be judged)."""
    from evalkit.models.backends import is_offline_standin
    from evalkit.replay.candidates import ARMS

    try:
        if not backend or not is_offline_standin(backend):
            return None
    except KeyError:
        return None

    def check(arm: str) -> bool:
        parts = arm.split("+")
        return all(p in ARMS and ARMS.entry(p).info.get("prompt_only", False) for p in parts)

    return check


# Rows of whole sessions the stage pairs at a time. What pairing builds from a chunk grows with it,
# and a run smaller than one chunk holds less: at the reader's 50,000 (metrics_stream.CHUNK_ROWS)
# the peak at 800 sessions was 1.2x the peak at 50, at 30,000 1.17x, for more, smaller pairings.
CHUNK_ROWS = 30_000


def _encoded(t: pa.Table) -> pa.Table:
    """``t`` with its arm, session and metric columns dictionary-encoded."""
    for c in ("arm", "session", "metric"):
        t = t.set_column(t.schema.get_field_index(c), c, pc.dictionary_encode(t.column(c)))
    return t


def decide_run(run_dir: str | os.PathLike, exp: Experiment, rules: Rules | None = None) -> dict:
    """The decide stage: read ``metrics.parquet`` (paired event by event) and the run's aggregate
    (which arms and metrics it has), write ``decision.json``."""
    run = Path(run_dir)
    path = RunPaths(run).metrics
    # Replicates are averaged and the run id and round are not read. The table is read a run of
    # sessions at a time (evalkit.contracts.metrics_stream): at ~1M rows, holding it whole and the frames
    # built from it made this stage the run's memory peak.
    columns = ["arm", "session", "event", "metric", "value", "error"]
    rules = rules or resolve_rules(exp.config.rules, exp.root)
    arms = list(exp.config.replay.arms)
    # The names as categoricals (each held once, pairing works on their codes), not a string per row.
    frames = (_encoded(t).to_pandas() for t in session_chunks(path, columns, rows=CHUNK_ROWS))
    prompt_only = prompt_only_arms(exp.config.model.backend)
    # Which (arm, metric) pairs and 0/1 metrics the run has: three columns, each name held once.
    agg = aggregate.load(run, ["arm", "metric", "not01"], encoded=True)
    # Per-candidate results only: the per-(arm, metric) means are the aggregate's (aggregate.summary).
    decision = decide_chunks(frames, aggregate.pairs(agg), rules, arms, prompt_only, aggregate.zero_one(agg))
    write_record(run, DecisionRecord, decision)
    return decision
