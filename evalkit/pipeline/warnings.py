"""What a person must see before trusting a run: its warnings, gathered at the end of the run.

Sessions the corpus skipped, arms that never compacted (with the trigger that would make them),
metrics whose scorer or judge failed on more than a share of rows, and the endpoints the run sent
to. Written to ``warnings.json`` (the report's first section reads it), printed on stderr at the
end of ``evalkit run``; ``--strict`` makes any warning exit 2. The endpoints are information, not
warnings.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from evalkit.contracts.config import ExperimentConfig, ReplayConfig
from evalkit.contracts.records import RunConfig, Warnings
from evalkit.contracts.runs import RunPaths, read_record, write_record


@dataclass(frozen=True)
class RunWarning:
    kind: str  # skipped_sessions | no_compactions | failing_metric
    text: str


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def skipped_sessions(manifest: dict) -> list[RunWarning]:
    skipped = manifest.get("skipped") or []
    if not skipped:
        return []
    s0 = skipped[0]
    if isinstance(s0, dict):  # {file, line, field, reason}: said as the corpus reader's errors are
        s0 = f"{s0.get('file')}:{s0.get('line')}: {s0.get('field')}: {s0.get('reason')}"
    first = str(s0)[:200]
    return [
        RunWarning(
            "skipped_sessions",
            f"{len(skipped)} session record(s) skipped while reading the corpus (corpus/manifest.json "
            f"lists them); first: {first}",
        )
    ]


def silent_arms(run_dir: Path, arms: list[str], replay: ReplayConfig, manifest: dict) -> list[RunWarning]:
    """Arms whose events file is empty, with the trigger setting that would make them compact."""
    from evalkit.contracts.event import events_path
    from evalkit.replay.settings import ReplaySettings
    from evalkit.replay.trigger_choice import choose_trigger
    from evalkit.replay.variants import settings_for

    silent = []
    for arm in arms:
        p = events_path(run_dir, arm)
        if p.is_file() and p.stat().st_size == 0:
            silent.append(arm)
    if not silent:
        return []
    base = ReplaySettings.from_section(replay)
    s = settings_for(base, silent[0], base.variants)
    rows = manifest.get("sessions") or []
    if s.trigger == "tokens":
        choice = choose_trigger(rows, s.threshold)
        why = (
            f'under trigger = "tokens" a session compacts past window - reserve = {s.threshold:,} tokens, '
            f"and the largest of {len(rows)} sessions is about {choice.largest_tokens:,}"
        )
        fix = f'set [replay] trigger = "messages" and max_messages = {choice.max_messages}'
    elif s.trigger == "messages":
        longest = max((int(r.get("messages", 0)) for r in rows), default=0)
        why = f'under trigger = "messages" a session compacts past max_messages = {s.max_messages}; the longest has {longest}'
        fix = f"lower [replay] max_messages (to about {max(4, longest // 2)})"
    else:
        why = 'under trigger = "recorded" only recorded compactions fire, and the sessions hold none'
        fix = 'set [replay] trigger = "messages"'
    return [
        RunWarning(
            "no_compactions",
            f"no compaction events for arm(s) {', '.join(silent)}: {why}; nothing of them is judged — {fix}",
        )
    ]


def failing_metrics(run_dir: Path, share: float) -> list[RunWarning]:
    """Metrics whose error rows exceed ``share`` of their rows, grouped by their first error."""
    import pyarrow.parquet as pq

    path = RunPaths(run_dir).metrics
    if not path.is_file():
        return []
    # Counted a row group at a time: the whole table's two columns grew with the corpus and were
    # the decide stage's largest read.
    rows: dict[str, int] = {}
    errors: dict[str, int] = {}
    first: dict[str, str] = {}  # the metric's first error row, in the table's order
    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        m = pf.read_row_group(i, columns=["metric", "error"]).to_pandas()
        for metric, n in m.groupby("metric", sort=False, observed=True).size().items():
            rows[metric] = rows.get(metric, 0) + int(n)
        bad = m[m.error.notna()]
        for metric, n in bad.groupby("metric", sort=False, observed=True).size().items():
            errors[metric] = errors.get(metric, 0) + int(n)
        for metric, err in bad.drop_duplicates("metric")[["metric", "error"]].itertuples(index=False):
            first.setdefault(metric, err)
    groups: dict[tuple[str, str], list[str]] = {}
    for metric in sorted(rows):
        n, e = rows[metric], errors.get(metric, 0)
        if e / n > share:
            pct = f"{e} of {n} rows ({e / n:.0%})"
            groups.setdefault((pct, str(first[metric])[:160]), []).append(str(metric))
    return [
        RunWarning(
            "failing_metric",
            f"{', '.join(names)}: {pct} are errors, above {share:.0%} (first: {err})",
        )
        for (pct, err), names in groups.items()
    ]


def collect(run_dir: str | Path, config: ExperimentConfig) -> dict:
    """The run's warnings and endpoints (``warnings.json``'s body)."""
    run_dir = Path(run_dir)
    manifest = _read_json(RunPaths(run_dir).manifest)
    replay = config.replay
    share = config.rules.max_error_share
    warnings = [
        *skipped_sessions(manifest),
        *silent_arms(run_dir, list(replay.arms), replay, manifest),
        *failing_metrics(run_dir, share),
    ]
    endpoints = rc.endpoints if (rc := read_record(run_dir, RunConfig)) else []
    return {"warnings": [asdict(w) for w in warnings], "endpoints": endpoints}


def write(run_dir: str | Path, config: ExperimentConfig) -> dict:
    body = collect(run_dir, config)
    write_record(run_dir, Warnings, body)
    return body


def summary_lines(body: dict) -> list[str]:
    """The stderr summary: one line per warning, then the endpoints."""
    ws = body.get("warnings", [])
    out = [f"warnings: {len(ws)}" if ws else "warnings: none"]
    out += [f"  warning: {w['text']}" for w in ws]
    eps = body.get("endpoints") or []
    out += [f"  endpoint: {e['role']}: {e['url']} ({e['source']})" for e in eps] or [
        "  endpoint: none (offline stand-ins only)"
    ]
    return out
