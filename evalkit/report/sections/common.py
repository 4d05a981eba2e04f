"""Helpers several report sections share: verdict marks, the stand-in check, interval labels, per-metric errors and directions."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from evalkit.contracts.metrics import question_family, question_key
from evalkit.models import is_offline_standin
from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline

VERDICT_MARK = {
    "ship": "✅ ship",
    "drop": "❌ drop",
    "inconclusive": "❔ inconclusive",
    "untested": "⏸ untested",
}


LOW_N = 30  # below this many sessions, intervals are wide (and seldom decide anything)


def verdict_mark(v: Any) -> str:
    return VERDICT_MARK.get(str(v), f"❓ {escape_inline(str(v))}")


def is_standin(data: ReportData) -> bool:
    backend = data.config.get("model", {}).get("backend")
    if not backend:
        return False
    try:
        return is_offline_standin(backend)
    except KeyError:  # a backend this install does not know; it is not the built-in stand-in
        return False


def confidence(data: ReportData) -> str:
    """The intervals' level: ``ci_level`` as the stats stage wrote it (two-sided 1 − 2α for its
    one-sided tests); older runs without it are read as two-sided 1 − α."""
    stats = data.decision.stats
    try:
        level = float(stats["ci_level"]) if "ci_level" in stats else 1 - float(stats.get("alpha"))
        return f"{100 * level:.0f}% interval"
    except (TypeError, ValueError):
        return "interval"


def interval_name(data: ReportData) -> str:
    """Which interval ``ci`` is: ``printed_interval`` as the stats stage wrote it (runs before it
    printed the inverted sign-flip test)."""
    kind = data.decision.stats.get("printed_interval")
    return {
        "bootstrap-t": "session bootstrap-t",
        "percentile": "session percentile",
        "bca": "session BCa",
    }.get(kind, "clustered t" if kind == "t" else "sign-flip")


def as_float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def metric_errors(data: ReportData, fold_questions: bool = False) -> dict[tuple[str, str], tuple[int, int]]:
    """(arm, metric) -> (errors, values), counted from the metrics table itself; with
    ``fold_questions``, an exam's per-question metrics are counted together as ``<family>:*``."""
    m = data.metrics
    if m.empty:
        return {}
    g = m.groupby(["arm", "metric"], observed=True)[["errors", "rows"]].sum()
    out: dict[tuple[str, str], tuple[int, int]] = {}
    # zip, not iterrows: one (arm, metric) per question metric makes this ~13,000 groups
    for (a, k), e, n in zip(g.index, g["errors"], g["rows"], strict=True):
        key = (str(a), question_key(str(k)) if fold_questions else str(k))
        errs, values = out.get(key, (0, 0))
        out[key] = (errs + int(e), values + int(n))
    return out


def split_questions(metrics: Iterable[str]) -> tuple[list[str], dict[str, int]]:
    """The metric names that are not per-question ones, in their order, and per exam family
    (:func:`evalkit.contracts.metrics.question_family`) how many per-question names it has. A table listing
    every name would grow with the corpus: each question's name is unique to its session."""
    plain: list[str] = []
    families: dict[str, int] = {}
    for m in metrics:
        family = question_family(str(m))
        if family is None:
            plain.append(m)
        else:
            families[family] = families.get(family, 0) + 1
    return plain, families


def questions_left_out(families: dict[str, int], what: str) -> list[str]:
    """A line saying which per-question metrics a table leaves out, or nothing when none."""
    if not families:
        return []
    listed = ", ".join(f"`{question_key(f + ':')}` ({n:,})" for f, n in sorted(families.items()))
    return [
        f"Per-question metrics are not listed {what}: {listed}. Each exam's score is, and the "
        "scorecard pairs its questions arm against arm.",
        "",
    ]


def probe_info(metrics: list[str] | tuple[str, ...] = ()) -> dict[str, tuple[str, str, str]]:
    """metric -> (direction, what it measures, what failure it catches), from the probe registry
    and the continuation stage's own table."""
    from evalkit.continuation.metrics import metric_info
    from evalkit.score import PROBES

    out = {}
    for e in PROBES:
        for metric, direction in e.info.get("metrics", {}).items():
            out[metric] = (str(direction), e.description, str(e.info.get("catches", "")))
    for m in metrics:
        if m not in out and (info := metric_info(m)) is not None:
            out[m] = info
    return out


def session_means(metrics: pd.DataFrame, metric: str) -> pd.DataFrame:
    m = metrics[(metrics["metric"] == metric) & metrics["error"].isna()]
    return m.groupby(["session", "arm"], observed=True)["value"].mean().unstack("arm")


def metric_direction(data: ReportData, metric: str) -> str | None:
    """``higher``/``lower`` from the verdicts or the probe registry; None when nothing records it."""
    for v in data.verdicts.values():
        m = v.metrics.get(metric)
        if m is not None and (d := m.direction):
            return str(d)
    info = probe_info([metric]).get(metric)
    return info[0] if info and info[0] in ("higher", "lower") else None


def continuation_manifest(data: ReportData) -> dict:
    """``continuation/manifest.json`` (agent, proxy flag, metrics), or {} when the run has none."""
    from evalkit.contracts.records import ContinuationManifest
    from evalkit.contracts.runs import RecordVersionError, RunFolderError, read_record

    try:
        rec = read_record(data.run_dir, ContinuationManifest)
    except RecordVersionError:
        raise
    except RunFolderError:
        return {}
    return rec.model_dump(mode="json", exclude_unset=True) if rec else {}
