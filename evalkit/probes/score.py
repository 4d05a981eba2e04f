"""Scoring stage: run the suite's probes over every stored event and write the metrics table."""

from __future__ import annotations

import json
import os
from pathlib import Path

from evalkit.events import read_events
from evalkit.facts import read_facts
from evalkit.metrics import MetricRow, to_frame, write_metrics
from evalkit.probes.base import PROBES, ProbeInput
from evalkit.progress import track
from evalkit.session import session_from_dict


def score_run(
    run_dir: str | os.PathLike, arms: list[str], probe_names: list[str] | None = None, run_id: str = ""
) -> int:
    """Score ``events/<arm>.jsonl`` for each arm into ``metrics.parquet``; returns the row count."""
    run = Path(run_dir)
    names = probe_names or PROBES.names()
    probes = [(n, PROBES.get(n)) for n in names]
    events_by_session: dict[str, dict[str, list]] = {}
    for arm in arms:
        for ev in read_events(run / "events" / f"{arm}.jsonl"):
            events_by_session.setdefault(ev.session, {}).setdefault(arm, []).append(ev)
    facts = {f.session: f for f in read_facts(run / "corpus")}
    rows: list[MetricRow] = []
    with open(run / "corpus" / "sessions.jsonl", encoding="utf-8") as fh:
        for line in track(fh, "score", total=len(facts), unit="sessions"):
            session = session_from_dict(json.loads(line))
            for arm, evs in events_by_session.get(session.id, {}).items():
                for k, ev in enumerate(evs):
                    inp = ProbeInput(ev, session, facts[session.id], evs[:k])
                    for name, fn in probes:
                        try:
                            values = fn(inp)
                        except Exception as e:  # a scorer bug is an error row, never a zero
                            rows.append(
                                MetricRow.failed(
                                    run_id,
                                    arm,
                                    session.id,
                                    ev.event,
                                    ev.round,
                                    ev.replicate,
                                    name,
                                    f"{type(e).__name__}: {e}",
                                )
                            )
                            continue
                        for v in values:
                            if v.value is None:
                                rows.append(
                                    MetricRow.failed(
                                        run_id,
                                        arm,
                                        session.id,
                                        ev.event,
                                        ev.round,
                                        ev.replicate,
                                        v.metric,
                                        v.error or "no value",
                                    )
                                )
                            else:
                                rows.append(
                                    MetricRow(
                                        run_id,
                                        arm,
                                        session.id,
                                        ev.event,
                                        ev.round,
                                        ev.replicate,
                                        v.metric,
                                        float(v.value),
                                    )
                                )
    write_metrics(to_frame(rows), run / "metrics.parquet")
    return len(rows)
