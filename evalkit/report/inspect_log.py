"""A run as Inspect AI eval logs (``evalkit export inspect RUN``), so a lab can browse it in
``inspect view`` beside its other evals.

One log per arm; one sample per (session, compaction event): the summary is the sample's output,
each metric of that event (and the session's session-level metrics, on its last event) a score.
An error is recorded as an error in the sample's metadata, never as a score of 0. Written and
read back with ``inspect_ai``'s own log API (the optional extra ``evalkit[inspect]``).
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from evalkit.common.redact import redact_text
from evalkit.contracts import questions as question_table
from evalkit.contracts.event import arm_filename, events_path, read_events
from evalkit.contracts.metrics import question_family, read_metrics
from evalkit.contracts.questions import metric_rows as question_rows
from evalkit.contracts.runs import RunPaths
from evalkit.report.data import load_report_data
from evalkit.report.sections.common import is_standin

INSTALL = "pip install 'evalkit[inspect]'"


def _rows(metrics, arm: str) -> dict[tuple[str, int, int], list[tuple[str, Any, Any]]]:
    """(session, event, replicate) -> [(metric, value, error)] of one arm."""
    m = metrics[metrics["arm"] == arm]
    out: dict[tuple[str, int, int], list] = {}
    for s, e, r, k, v, err in zip(
        m["session"], m["event"], m["replicate"], m["metric"], m["value"], m["error"], strict=True
    ):
        out.setdefault((str(s), int(e), int(r)), []).append((str(k), v, err))
    return out


def _ok(v: Any, err: Any) -> bool:
    return err is None or (isinstance(err, float) and math.isnan(err)) or str(err) in ("", "<NA>", "nan")


def export_inspect(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> list[Path]:
    """Write ``<arm>.eval`` per arm into ``out_dir`` (default ``RUN/inspect``); each is read back
    with ``inspect_ai.log.read_eval_log`` before this returns. Raises ImportError naming the
    extra when ``inspect_ai`` is not installed."""
    try:
        from inspect_ai.log import (
            EvalConfig,
            EvalDataset,
            EvalLog,
            EvalMetric,
            EvalResults,
            EvalSample,
            EvalScore,
            EvalSpec,
            read_eval_log,
            write_eval_log,
        )
        from inspect_ai.model import ModelOutput
        from inspect_ai.scorer import Score
    except ImportError as e:
        raise ImportError(f"inspect_ai is not installed ({e}); {INSTALL}") from None

    run = Path(run_dir)
    data = load_report_data(run)
    out = Path(out_dir) if out_dir else run / "inspect"
    out.mkdir(parents=True, exist_ok=True)
    # The exams' question grades go with each sample's scores, under their ``<exam>_q:<id>`` names.
    # Read again as text (the report's copy holds categoricals), as the metrics rows are.
    asked = question_table.read(run, columns=[c for c in question_table.COLUMNS if c != "about"])
    metrics = pd.concat([read_metrics(RunPaths(run).metrics), question_rows(asked)], ignore_index=True)
    model_cfg = data.config.get("model", {})
    model = f"{model_cfg.get('backend', 'unknown')}/{model_cfg.get('model', 'unknown')}"
    standin = is_standin(data)
    created = datetime.now(UTC).isoformat(timespec="seconds")
    means: dict[str, dict[str, float]] = {}
    for d in data.summary:
        mean = d.get("mean")
        if (
            isinstance(mean, int | float)
            and math.isfinite(mean)
            and question_family(str(d["metric"])) is None
        ):
            means.setdefault(str(d["arm"]), {})[str(d["metric"])] = float(mean)
    written = []
    for arm in data.arms:
        path = events_path(run, arm)
        if not path.is_file():
            continue
        rows = _rows(metrics, arm)
        events = list(read_events(path))
        last = {}
        for ev in events:
            key = (ev.session, ev.replicate)
            last[key] = max(last.get(key, -1), ev.event)
        samples = []
        for ev in events:
            found = list(rows.get((ev.session, ev.event, ev.replicate), []))
            if last[(ev.session, ev.replicate)] == ev.event:  # session-level metrics live on event -1
                found += rows.get((ev.session, -1, ev.replicate), [])
            scores, questions, errors = {}, {}, {}
            for metric, v, err in found:
                if not _ok(v, err):
                    errors[metric] = str(err)
                elif question_family(metric) is not None:
                    questions[metric] = float(v)
                elif v is not None and math.isfinite(float(v)):
                    scores[metric] = Score(value=float(v))
            samples.append(
                EvalSample(
                    id=f"{ev.session}/{ev.event}" + (f"/r{ev.replicate}" if ev.replicate else ""),
                    epoch=1,
                    input=(
                        f"Compaction {ev.round} of session {ev.session} under arm {arm}: "
                        f"{ev.tokens_before} tokens at message {ev.at_message} (window {ev.window})."
                    ),
                    target="",
                    output=ModelOutput.from_content(
                        model,
                        redact_text(ev.summary),
                        error=ev.summary_error and redact_text(ev.summary_error),
                    ),
                    scores=scores,
                    metadata={
                        "arm": arm,
                        "session": ev.session,
                        "event": ev.event,
                        "round": ev.round,
                        "tokens_before": ev.tokens_before,
                        "tokens_after": ev.tokens_after,
                        "carried": len(ev.carried),
                        "over_limit": ev.invariants.over_limit,
                        "question_grades": questions,
                        "errors": errors,
                        "offline_standin": standin,
                    },
                )
            )
        verdict = data.verdicts.get(arm)
        log = EvalLog(
            status="success",
            eval=EvalSpec(
                created=created,
                task=f"evalkit/{data.name}",
                task_args={"arm": arm, "baseline": data.baseline},
                dataset=EvalDataset(name=data.name, samples=len(samples)),
                model=model,
                config=EvalConfig(),
                metadata={
                    "run_dir": str(run),
                    "offline_standin": standin,
                    "verdict": verdict.verdict if verdict else None,
                    "reason": verdict.reason if verdict else None,
                    "deciding_metric": verdict.deciding_metric if verdict else None,
                },
            ),
            results=EvalResults(
                total_samples=len(samples),
                completed_samples=len(samples),
                scores=[
                    EvalScore(name=m, scorer="evalkit", metrics={"mean": EvalMetric(name="mean", value=v)})
                    for m, v in sorted(means.get(arm, {}).items())
                ],
            ),
            samples=samples,
        )
        target = out / f"{arm_filename(arm)}.eval"
        write_eval_log(log, target)
        back = read_eval_log(str(target), header_only=True)
        if back.results is None or back.results.total_samples != len(samples):
            raise RuntimeError(f"{target}: read back with {back.results} samples, wrote {len(samples)}")
        written.append(target)
    return written
