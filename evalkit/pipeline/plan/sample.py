"""The plan's sample: which sessions it dry-replays, and how far its scaled-up totals may be off."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from evalkit.contracts.config import Experiment
from evalkit.contracts.session import Session, session_from_dict


def sample_sessions(exp: Experiment, run_dir: Path, k: int) -> tuple[list[Session], int, dict[str, dict]]:
    """Up to ``k`` sessions: from the run folder's corpus when it exists, else generated (the first
    ``k`` of a synthetic corpus are the same whatever its size); the corpus size; and the corpus
    manifest's rows by session id (messages, bytes) when the whole corpus was read ({} for a
    synthetic corpus generated only as far as the sample)."""
    from evalkit.corpus import build_corpus

    section = exp.config.corpus
    existing = run_dir / "corpus" / "sessions.jsonl"
    if existing.is_file():
        return _read_sessions(existing, k), _count_lines(existing), _manifest_rows(existing.parent)
    if section.kind == "synth":
        n = section.sessions
        with tempfile.TemporaryDirectory() as d:
            build_corpus(section.model_copy(update={"sessions": min(k, n)}), exp.seed, d, workers=1)
            rows = _manifest_rows(Path(d)) if n <= k else {}
            return _read_sessions(Path(d) / "sessions.jsonl", k), n, rows
    with tempfile.TemporaryDirectory() as d:
        build_corpus(section, exp.seed, d, exp.resolve_path(section.path), workers=1)
        p = Path(d) / "sessions.jsonl"
        return _read_sessions(p, k), _count_lines(p), _manifest_rows(Path(d))


def _manifest_rows(corpus: Path) -> dict[str, dict]:
    from evalkit.contracts.records import CorpusManifest
    from evalkit.contracts.runs import RunFolderError, load_record

    try:
        rows = load_record(corpus / CorpusManifest.NAME, CorpusManifest).sessions
    except (OSError, RunFolderError):
        return {}
    return {str(r.get("id")): r for r in rows if isinstance(r, dict)}


def _read_sessions(path: Path, k: int) -> list[Session]:
    import json

    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(session_from_dict(json.loads(line)))
                if len(out) >= k:
                    break
    return out


def _count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for ln in fh if ln.strip())


def sampling_error(
    per_session: list[list[float]],
    total: int,
    sizes: list[float] | None = None,
) -> dict[str, Any]:
    """One standard error of the scaled-up totals (requests, dollars) from the sampled sessions'
    own counts, with the finite-population correction (0 when every session was sampled; None
    when one session cannot tell). With the sampled sessions' ``sizes`` the totals are ratio
    estimates and the error is the ratio estimator's (Cochran, Sampling Techniques §6.3)."""
    import statistics

    n = len(per_session)
    out: dict[str, Any] = {"sampled": n, "sessions": total, "scaled_by": "size" if sizes else "sessions"}
    for i, name in ((0, "requests_se"), (1, "cost_usd_se")):
        ys = [float(r[i]) for r in per_session]
        if n >= total:
            out[name] = 0.0
        elif n < 2:
            out[name] = None
        elif sizes:
            ratio = sum(ys) / sum(sizes)
            resid = [y - ratio * x for y, x in zip(ys, sizes, strict=True)]
            out[name] = total * statistics.stdev(resid) / math.sqrt(n) * math.sqrt(1 - n / total)
        else:
            out[name] = total * statistics.stdev(ys) / math.sqrt(n) * math.sqrt(1 - n / total)
    return out
