"""Writing the viewer: the page and its assets, the overview's data, one data file per session and arm.

The page is static and self-contained (no server, no network): ``index.html`` loads
``data/overview.js`` with a ``<script>`` tag, and a session's files only when a session page is
opened, so a 200-session run opens in the time one small file takes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from evalkit.common.files import index_jsonl
from evalkit.contracts.event import arm_filename, events_path
from evalkit.contracts.metrics import question_family
from evalkit.contracts.questions import metric_name
from evalkit.report.data import ReportData, load_report_data
from evalkit.report.sections.common import is_standin, session_means
from evalkit.report.sections.effects import glossary
from evalkit.report.sections.evidence import _evidence_metric
from evalkit.report.sections.readfirst import read_first
from evalkit.report.view import VIEW_DIR
from evalkit.report.view.session import SessionJob, build_session, write_data

ASSETS = ("index.html", "app.js", "app.css")
TOP_SESSIONS = 10  # per candidate, the sessions where it differs most from the baseline


def _num(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _plain_md(text: str) -> str:
    """A report sentence as plain text (the page sets it as text: Markdown marks would show)."""
    return text.replace("**", "").replace("`", "")


def _candidates(data: ReportData) -> dict[str, Any]:
    """Per candidate: the metric its evidence uses and the sessions where it differs most."""
    out: dict[str, Any] = {}
    base = data.baseline
    for cand in [a for a in data.arms if a != base]:
        metric = _evidence_metric(data, cand) if not data.metrics.empty else None
        top: list[list[Any]] = []
        if metric:
            means = session_means(data.metrics, metric)
            if cand in means and base in means:
                both = means[[base, cand]].dropna()
                diff = (both[cand] - both[base]).sort_values(key=abs, ascending=False)
                top = [
                    [str(s), _num(both.loc[s, base]), _num(both.loc[s, cand]), _num(d)]
                    for s, d in diff.head(TOP_SESSIONS).items()
                ]
        out[cand] = {"metric": metric, "top": top}
    return out


def _overview(data: ReportData, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    verdicts = []
    effects = []
    for cand, v in data.verdicts.items():
        verdicts.append(
            {
                "cand": cand,
                "verdict": v.verdict,
                "metric": v.deciding_metric,
                "p": _num(v.deciding_p),
                "test": v.deciding_test,
                "n": v.n_sessions,
                "reason": v.reason,
            }
        )
        for m, d in v.metrics.items():
            ci = d.ci or [None, None]
            effects.append(
                {
                    "cand": cand,
                    "metric": m,
                    "deciding": m == v.deciding_metric,
                    "verdict": v.verdict,
                    "role": d.role,
                    "direction": d.direction,
                    "estimate": _num(d.estimate),
                    "lo": _num(ci[0]),
                    "hi": _num(ci[1]),
                    "threshold": _num(d.threshold),
                    "p_value": _num(d.p_value),
                    "p_worse": _num(d.p_worse),
                    "p_holm": _num(d.p_holm),
                    "mde": _num(d.mde),
                    "n": d.n_sessions,
                    "errors": d.errors,
                    "base": _num(d.baseline_mean),
                    "mean": _num(d.candidate_mean),
                }
            )
    means = [
        {
            "arm": str(d.get("arm")),
            "metric": str(d.get("metric")),
            "mean": _num(d.get("mean")),
            "n": d.get("sessions"),
            "errors": d.get("errors"),
        }
        for d in data.summary
        if question_family(str(d.get("metric"))) is None
    ]
    tokens = {}
    if len(data.events):
        per = data.events.groupby(["arm", "session"])["tokens_after"].mean().groupby(level="arm").mean()
        tokens = {str(a): _num(x) for a, x in per.items()}
    return {
        "name": data.name,
        "run_dir": str(data.run_dir),
        "baseline": data.baseline,
        "arms": data.arms,
        "standin": is_standin(data),
        "warnings": [_plain_md(w) for w in read_first(data)],
        "verdicts": verdicts,
        "effects": effects,
        "means": means,
        "tokens": tokens,
        "glossary": [list(r) for r in glossary(data)],
        "candidates": _candidates(data),
        "sessions": sessions,
    }


def _grades(questions: pd.DataFrame) -> dict[str, dict[tuple[str, int], list]]:
    """session -> (arm, event) -> [(``<exam>_q:<question>``, grade or None, error)] for the exam
    questions (the question table, :mod:`evalkit.contracts.questions`)."""
    if questions.empty:
        return {}
    q = questions
    names = [metric_name(x, y) for x, y in zip(q["exam"], q["question"], strict=True)]
    out: dict[str, dict[tuple[str, int], list]] = {}
    for arm, sess, ev, m, v, e in zip(
        q["arm"], q["session"], q["event"], names, q["grade"], q["error"], strict=True
    ):
        err = None if e is None or (isinstance(e, float) and math.isnan(e)) or e is pd.NA else str(e)
        out.setdefault(str(sess), {}).setdefault((str(arm), int(ev)), []).append((str(m), _num(v), err))
    return out


def _questions(run: Path) -> dict[str, dict[str, str]]:
    """session -> judge question id -> its text (``corpus/questions.jsonl``)."""
    path = run / "corpus" / "questions.jsonl"
    out: dict[str, dict[str, str]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                out[d["session"]] = {q["id"]: q.get("text", "") for q in d.get("questions") or []}
    return out


def write_view(run_dir: str | os.PathLike, workers: int | None = None) -> Path:
    """Write the viewer into ``RUN/view/``; returns its ``index.html``."""
    from evalkit.common.workers import worker_pool

    run = Path(run_dir)
    data = load_report_data(run)
    out = run / VIEW_DIR
    shutil.rmtree(out / "data", ignore_errors=True)  # sessions of an earlier view must not linger
    (out / "data").mkdir(parents=True)
    corpus = run / "corpus" / "sessions.jsonl"
    if not corpus.is_file():
        raise FileNotFoundError(f"{corpus}: no corpus in the run folder, so no session to show")
    sessions = index_jsonl(corpus, "id")
    facts_path = run / "corpus" / "facts.jsonl"
    facts = {s: v[-1] for s, v in index_jsonl(facts_path, "session").items()} if facts_path.is_file() else {}
    arms = data.arms
    ev_index = {a: index_jsonl(events_path(run, a), "session") for a in arms if events_path(run, a).is_file()}
    grades = _grades(data.questions)
    questions = _questions(run)
    ids = sorted({s for idx in ev_index.values() for s in idx} & sessions.keys())
    jobs = [
        SessionJob(
            str(run),
            sid,
            f"s{i:04d}",
            (str(corpus), sessions[sid][0]),
            (str(facts_path), facts[sid]) if sid in facts else None,
            {
                a: (arm_filename(a), str(events_path(run, a)), idx[sid])
                for a, idx in ev_index.items()
                if sid in idx
            },
            questions.get(sid, {}),
            grades.get(sid, {}),
            str(out / "data"),
        )
        for i, sid in enumerate(ids)
    ]
    n = workers or os.cpu_count() or 1
    if n > 1 and len(jobs) > 1:
        with worker_pool(n) as pool:
            listed = list(pool.map(build_session, jobs, chunksize=1))
    else:
        listed = [build_session(j) for j in jobs]
    for s in listed:
        s["files"] = {a: f"{s['chunk']}-{arm_filename(a)}.js" for a in s["events"]}
    write_data(out / "data" / "overview.js", "overview", _overview(data, listed))
    assets = resources.files("evalkit.report.view") / "assets"
    for name in ASSETS:
        (out / name).write_bytes((assets / name).read_bytes())
    return out / "index.html"
