"""The plan's sample: which sessions it dry-replays, and how far its scaled-up totals may be off."""

from __future__ import annotations

import math
import random
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.contracts.config import Experiment, ReplayConfig
from evalkit.contracts.session import Session, session_from_dict

MIN_SAMPLE = 8  # sessions dry-replayed at least, when not every one is
# Every session is dry-replayed when the corpus's bytes times its arms and replicates stay under
# this. The dry replay's cost grows with that volume (the prompts it builds and hashes): about
# 0.1-0.2 s of CPU per MB; 100 MB is some 10-20 s, a few paid calls' latency. Above it the plan
# draws as many sessions as fit (at least MIN_SAMPLE) and states its sampling error.
FULL_REPLAY_MB = 100.0


@dataclass
class Drawn:
    """The sessions the plan dry-replays, out of ``total``."""

    sessions: list[Session]
    total: int
    rows: dict[str, dict]  # the corpus manifest's rows by session id; {} when the corpus is not read
    how: str  # "all" | "random" (drawn at random, seeded by the experiment's seed)
    volume_mb: float | None  # the corpus's MB x arms x replicates (None when not known)


def sample_sessions(exp: Experiment, run_dir: Path, k: int | None = None) -> Drawn:
    """The sessions to dry-replay: ``k`` drawn at random (every one when ``k`` is at least the
    corpus's size), or with ``k`` None every one when the corpus's dry-replay volume is under
    :data:`FULL_REPLAY_MB`, else as many as fit in it and at least :data:`MIN_SAMPLE`. From the
    run folder's corpus when it exists, else built as the run would (a synthetic corpus only as
    far as the sample, unless the sample's sizes say the whole fits)."""
    from evalkit.corpus import build_corpus

    section = exp.config.corpus
    per_session = len(exp.config.replay.arms) * exp.config.model.replicates
    existing = run_dir / "corpus" / "sessions.jsonl"
    if existing.is_file():
        return _draw(existing, exp, k, per_session)
    with tempfile.TemporaryDirectory() as d:
        if section.kind != "synth":
            build_corpus(section, exp.seed, d, exp.resolve_path(section.path), workers=1)
            return _draw(Path(d) / "sessions.jsonl", exp, k, per_session)
        n = section.sessions
        order = _rng(exp).sample(range(n), n)
        chosen = set(order[: MIN_SAMPLE if k is None else k])
        build_corpus(section, exp.seed, d, workers=1, select=chosen.__contains__)
        rows = _manifest_list(Path(d))
        if len(chosen) < n and k is None and rows:
            # Synthetic sessions are independent draws: the sample's mean size tells how many of
            # them fit in the volume of a full dry replay.
            mb = statistics.fmean(float(r.get("bytes") or 0) for r in rows) * per_session / 1e6
            fit = int(FULL_REPLAY_MB // mb) if mb > 0 else n
            if fit >= n:
                build_corpus(section, exp.seed, d, workers=1)
                return _draw(Path(d) / "sessions.jsonl", exp, None, per_session)
            if fit > len(chosen):
                chosen = set(order[:fit])
                build_corpus(section, exp.seed, d, workers=1, select=chosen.__contains__)
                rows = _manifest_list(Path(d))
        sessions = _read_positions(Path(d) / "sessions.jsonl", None)
        if len(chosen) >= n:
            return Drawn(sessions, n, _by_id(rows), "all", _volume(rows, per_session))
        return Drawn(sessions, n, {}, "random", None)


def _draw(path: Path, exp: Experiment, k: int | None, per_session: int) -> Drawn:
    rows = _manifest_list(path.parent)
    n = len(rows) if rows else _count_lines(path)
    volume = _volume(rows, per_session) if rows else None
    if (k is None and volume is not None and volume <= FULL_REPLAY_MB) or (k is not None and k >= n):
        return Drawn(_read_positions(path, None), n, _by_id(rows), "all", volume)
    order = _rng(exp).sample(range(n), n)
    if k is not None or not rows:
        chosen = order[: MIN_SAMPLE if k is None else k]
    else:
        chosen, used = [], 0.0
        for i in order:
            mb = float(rows[i].get("bytes") or 0) * per_session / 1e6
            if len(chosen) >= MIN_SAMPLE and used + mb > FULL_REPLAY_MB:
                break
            chosen.append(i)
            used += mb
    how = "all" if len(chosen) >= n else "random"  # a corpus of up to 8 without a manifest
    return Drawn(_read_positions(path, set(chosen)), n, _by_id(rows), how, volume)


def _rng(exp: Experiment) -> random.Random:
    # Seeded by the experiment: the same plan twice dry-replays the same sessions.
    return random.Random(f"evalkit plan {exp.seed}")


def _volume(rows: list[dict], per_session: int) -> float:
    return sum(float(r.get("bytes") or 0) for r in rows) * per_session / 1e6


def expected_compactions(row: dict, replay: ReplayConfig) -> float:
    """How far a session runs past ``[replay]``'s trigger, from its manifest row: the plan's
    measure of a session's size. Its requests grow with its compactions, and a session that
    never reaches the trigger sends none, so this scales a sample better than its plain size
    (messages or bytes), which counts the sessions below the trigger too."""
    if replay.trigger == "messages":
        return max(0.0, float(row.get("messages") or 0) - replay.max_messages)
    if replay.trigger == "tokens":  # bytes over 4 for tokens, as the chars4 tokenizer counts
        return max(0.0, float(row.get("bytes") or 0) / 4 - (replay.window - replay.reserve))
    if replay.trigger == "once":
        return 1.0
    return float(row.get("bytes") or 0)  # "recorded": where the session compacted, unknown here


def scale_factor(drawn: Drawn, replay: ReplayConfig) -> tuple[float, list[float] | None, str]:
    """The factor from the sample's counts to the corpus's, the sampled sessions' sizes when it is
    a ratio of sizes (else None: a ratio of session counts), and what it is, in words."""
    n = len(drawn.sessions)
    if n >= drawn.total:
        return 1.0, None, "every session"
    rows = drawn.rows
    sizes = [expected_compactions(rows[s.id], replay) if s.id in rows else None for s in drawn.sessions]
    if rows and all(x is not None for x in sizes) and sum(sizes) > 0:  # type: ignore[misc]
        corpus = sum(expected_compactions(r, replay) for r in rows.values())
        what = {"messages": "messages beyond max_messages", "tokens": "tokens beyond window - reserve"}
        basis = what.get(replay.trigger, "bytes")
        return corpus / sum(sizes), sizes, f"the corpus's {basis} over the sample's"  # type: ignore[arg-type]
    return drawn.total / max(1, n), None, "sessions"


def _manifest_list(corpus: Path) -> list[dict]:
    from evalkit.contracts.records import CorpusManifest
    from evalkit.contracts.runs import RunFolderError, load_record

    try:
        rows = load_record(corpus / CorpusManifest.NAME, CorpusManifest).sessions
    except (OSError, RunFolderError):
        return []
    return [r for r in rows if isinstance(r, dict)]


def _by_id(rows: list[dict]) -> dict[str, dict]:
    return {str(r.get("id")): r for r in rows}


def _read_positions(path: Path, chosen: set[int] | None) -> list[Session]:
    """The sessions at the ``chosen`` lines of ``path`` (every one with None), in file order."""
    import json

    out = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(ln for ln in fh if ln.strip()):
            if chosen is None or i in chosen:
                out.append(session_from_dict(json.loads(line)))
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
