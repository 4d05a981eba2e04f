"""What changed between two runs: verdicts and effect sizes, as Markdown short enough for a PR comment."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from evalkit.report.escape import escape_inline
from evalkit.report.markdown import code, interval, num, table
from evalkit.report.sections.common import verdict_mark


def _load(run: str | os.PathLike) -> tuple[dict, dict]:
    from evalkit.contracts.runs import read_json_file, run_config, run_folder

    run = run_folder(run)
    p = run / "decision.json"
    if not p.exists():
        raise FileNotFoundError(f"{p}: missing (run the decide stage first)")
    decision = read_json_file(p, "decision (an object)")
    if not isinstance(decision.get("verdicts") or {}, dict):
        raise ValueError(f"{p}: field 'verdicts': not an object")
    return decision, run_config(run)


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


def _summary(run: str | os.PathLike, decision: dict) -> list[dict]:
    """Per (arm, metric) means from the run's aggregate (an older run's ``decision.json`` has them)."""
    from evalkit.contracts import aggregate

    if (Path(run) / "metrics.parquet").is_file():
        return aggregate.summary(aggregate.load(run))
    return list(decision.get("summary") or [])


def _interval(decision: dict) -> str:
    """The decision interval's name as decision.json gives it ("95% session bootstrap-t, B resamples,
    seed S"); runs before the session bootstrap named only its kind."""
    st = decision.get("stats") or {}
    if st.get("printed_interval") in ("bootstrap-t", "percentile", "bca"):
        return str(st.get("interval"))
    return {"t": "clustered t"}.get(st.get("printed_interval"), "sign-flip") + " (an older run)"


def render_compare(run_a: str | os.PathLike, run_b: str | os.PathLike) -> str:
    """Markdown: config differences, verdict changes, and per-metric effects A → B."""
    (da, ca), (db, cb) = _load(run_a), _load(run_b)
    a, b = Path(run_a), Path(run_b)
    out = [f"### evalkit compare: {code(a.name)} → {code(b.name)}", ""]
    fa, fb = _flat(ca.get("config", {})), _flat(cb.get("config", {}))
    changed = [k for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
    if changed:
        rows = [[code(k), code(json.dumps(fa.get(k))), code(json.dumps(fb.get(k)))] for k in changed]
        out += ["Config changes:", "", table(["key", "A", "B"], rows), ""]
    else:
        out += [
            "Same config"
            + (f" (hash {code(ca['config_hash'][:12])})" if ca.get("config_hash") else "")
            + ".",
            "",
        ]

    va, vb = da.get("verdicts") or {}, db.get("verdicts") or {}
    cands = list(dict.fromkeys([*va, *vb]))
    if not cands:
        out += ["Neither run has verdicts (`decision.json` → `verdicts` is empty or missing).", ""]
    else:
        rows, n_changed = [], 0
        for c in cands:
            x, y = va.get(c, {}).get("verdict", "absent"), vb.get(c, {}).get("verdict", "absent")
            flag = "changed" if x != y else "same"
            n_changed += x != y
            mark = lambda v: "—" if v == "absent" else verdict_mark(v)  # noqa: E731
            rows.append(
                [
                    code(c),
                    mark(x),
                    mark(y),
                    f"**{flag}**" if x != y else flag,
                    escape_inline(str(vb.get(c, {}).get("reason") or va.get(c, {}).get("reason") or "")),
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
            ma, mb = va.get(c, {}).get("metrics") or {}, vb.get(c, {}).get("metrics") or {}
            for m in sorted(set(ma) | set(mb)):
                ea, eb = ma.get(m, {}), mb.get(m, {})
                delta = _f(eb.get("estimate")) - _f(ea.get("estimate"))
                rows.append(
                    [
                        code(c),
                        code(m),
                        f"{num(ea.get('estimate'), signed=True)} {interval(ea.get('ci'))}" if ea else "—",
                        f"{num(eb.get('estimate'), signed=True)} {interval(eb.get('ci'))}" if eb else "—",
                        num(delta, signed=True),
                        f"{ea.get('n_sessions', '—')} → {eb.get('n_sessions', '—')}",
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
