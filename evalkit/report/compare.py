"""What changed between two runs: verdicts and effect sizes, as Markdown short enough for a PR comment."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from evalkit.contracts.records import Decision, MetricEstimate, RunConfig
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import code, interval, num, table
from evalkit.report.sections.common import verdict_mark


def _load(run: str | os.PathLike) -> tuple[Decision, RunConfig]:
    from evalkit.contracts.runs import load_run

    loaded = load_run(run)
    if loaded.decision is None:
        raise FileNotFoundError(f"{loaded.paths.decision}: missing (run the decide stage first)")
    assert loaded.run_config is not None  # load_run checked the folder has one
    return loaded.decision, loaded.run_config


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _f(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _summary(run: str | os.PathLike, decision: Decision) -> list[dict]:
    """Per (arm, metric) means from the run's aggregate (an older run's ``decision.json`` has them)."""
    from evalkit.contracts import aggregate
    from evalkit.contracts.runs import RunPaths

    if RunPaths(Path(run)).metrics.is_file():
        return aggregate.summary(aggregate.load(run))
    return list(decision.summary or [])


def _interval(decision: Decision) -> str:
    """The decision interval's name as decision.json gives it ("95% session bootstrap-t, B resamples,
    seed S"); runs before the session bootstrap named only its kind."""
    st = decision.stats
    if st.get("printed_interval") in ("bootstrap-t", "percentile", "bca"):
        return str(st.get("interval"))
    return {"t": "clustered t"}.get(st.get("printed_interval"), "sign-flip") + " (an older run)"


def _n_sessions(e: MetricEstimate | None) -> str:
    """A metric's session count as the file has it; "—" when it has none (or the metric is absent)."""
    return str(e.n_sessions) if e is not None and "n_sessions" in e.model_fields_set else "—"


def render_compare(run_a: str | os.PathLike, run_b: str | os.PathLike) -> str:
    """Markdown: config differences, verdict changes, and per-metric effects A → B."""
    (da, ca), (db, cb) = _load(run_a), _load(run_b)
    a, b = Path(run_a), Path(run_b)
    out = [f"### evalkit compare: {code(a.name)} → {code(b.name)}", ""]
    fa, fb = _flat(ca.config), _flat(cb.config)
    changed = [k for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
    if changed:
        rows = [[code(k), code(json.dumps(fa.get(k))), code(json.dumps(fb.get(k)))] for k in changed]
        out += ["Config changes:", "", table(["key", "A", "B"], rows), ""]
    else:
        out += [
            "Same config" + (f" (hash {code(ca.config_hash[:12])})" if ca.config_hash else "") + ".",
            "",
        ]

    va, vb = da.verdicts, db.verdicts
    cands = list(dict.fromkeys([*va, *vb]))
    if not cands:
        out += ["Neither run has verdicts (`decision.json` → `verdicts` is empty or missing).", ""]
    else:
        rows, n_changed = [], 0
        for c in cands:
            x = va[c].verdict if c in va else "absent"
            y = vb[c].verdict if c in vb else "absent"
            flag = "changed" if x != y else "same"
            n_changed += x != y
            mark = lambda v: "—" if v == "absent" else verdict_mark(v)  # noqa: E731
            rows.append(
                [
                    code(c),
                    mark(x),
                    mark(y),
                    f"**{flag}**" if x != y else flag,
                    escape_inline((vb[c].reason if c in vb else "") or (va[c].reason if c in va else "")),
                ]
            )
        out += [
            f"**{n_changed} of {len(cands)} verdicts changed.**",
            "",
            table(["candidate", "verdict A", "verdict B", "change", "rule (B)"], rows),
            "",
        ]
        rows = []
        for c in cands:
            ma = va[c].metrics if c in va else {}
            mb = vb[c].metrics if c in vb else {}
            for m in sorted(set(ma) | set(mb)):
                ea, eb = ma.get(m), mb.get(m)
                delta = _f(eb.estimate if eb else None) - _f(ea.estimate if ea else None)
                rows.append(
                    [
                        code(c),
                        code(m),
                        f"{num(ea.estimate, signed=True)} {interval(ea.ci)}" if ea else "—",
                        f"{num(eb.estimate, signed=True)} {interval(eb.ci)}" if eb else "—",
                        num(delta, signed=True),
                        f"{_n_sessions(ea)} → {_n_sessions(eb)}",
                    ]
                )
        if rows:
            out += [
                f"Effects (candidate − baseline; intervals: A {_interval(da)}, B {_interval(db)}):",
                "",
                table(["candidate", "metric", "A", "B", "B − A", "n sessions"], rows),
                "",
            ]
    sa = {(d.get("arm"), d.get("metric")): d for d in _summary(run_a, da)}
    sb = {(d.get("arm"), d.get("metric")): d for d in _summary(run_b, db)}
    keys = sorted(set(sa) | set(sb), key=lambda k: (str(k[1]), str(k[0])))
    if keys:
        rows = [
            [
                code(m),
                code(arm),
                num(sa.get((arm, m), {}).get("mean")),
                num(sb.get((arm, m), {}).get("mean")),
                num(_f(sb.get((arm, m), {}).get("mean")) - _f(sa.get((arm, m), {}).get("mean")), signed=True),
            ]
            for arm, m in keys
        ]
        out += [
            "<details><summary>Metric means per arm</summary>",
            "",
            table(["metric", "arm", "A", "B", "B − A"], rows),
            "",
            "</details>",
        ]
    return "\n".join(out).rstrip() + "\n"
