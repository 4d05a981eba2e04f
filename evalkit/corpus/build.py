"""Building a corpus folder: ``sessions.jsonl``, ``facts.jsonl`` (the ground truth derived once
per session, see :mod:`evalkit.facts`) and ``manifest.json`` (ids, content hashes and counts)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from evalkit.common.files import AtomicWriter
from evalkit.common.progress import log
from evalkit.contracts.config import CorpusConfig
from evalkit.contracts.records import CorpusManifest
from evalkit.contracts.runs import save_record
from evalkit.contracts.session import Session, reused_call_ids, session_to_json
from evalkit.corpus.io import ReadStats, read_sessions, session_hash


def _encoded(s: Session) -> tuple[str, str, dict]:
    """(session line, facts line, manifest row) for one session; runs in a worker process."""
    from evalkit.facts import compute_facts, facts_to_dict

    line = session_to_json(s)
    facts = json.dumps(facts_to_dict(compute_facts(s)), separators=(",", ":"))
    row = {
        "id": s.id,
        "hash": session_hash(line),
        "format": s.source.format,
        "messages": len(s.messages),
        "bytes": len(line.encode("utf-8")) + 1,
    }
    return line, facts, row


# Files later stages pin beside a corpus (judge questions point at message indices): a new
# corpus in the same folder makes them wrong, so they are rebuilt from it.
QUESTIONS = "questions.jsonl"
DERIVED = (QUESTIONS,)


def _drop_derived(out: Path) -> None:
    for name in DERIVED:
        (out / name).unlink(missing_ok=True)


def _write_encoded(encoded: Iterable[tuple[str, str, dict]], sfh, ffh) -> tuple[list[dict], dict]:
    """Write encoded sessions and their facts; returns the manifest rows and the corpus stats.

    The stats are counted as the facts go by: holding every session's facts until the end made
    the stage's memory grow with the corpus."""
    rows: list[dict] = []

    def facts():
        for line, facts_line, row in encoded:
            sfh.write(line + "\n")
            ffh.write(facts_line + "\n")
            rows.append(row)
            yield json.loads(facts_line)

    return rows, corpus_stats(facts(), rows)


def _synth_one(args: tuple[int, int, int]) -> tuple[str, str, dict]:
    from evalkit.corpus.synth import generate_session

    return _encoded(generate_session(*args))


def corpus_stats(facts_rows: Iterable[dict], manifest_rows: list[dict], threshold: int = 2_000) -> dict:
    """Corpus sizes and the tally-position figure the head-tail candidate answers.

    ``facts_rows`` is read once, before ``manifest_rows``: a generator may fill the latter as it goes."""
    tallies = failures = fixed = constraints = compactions = long_outputs = late = 0
    for f in facts_rows:
        tallies += len(f["tallies"])
        failures += len(f["failures"])
        fixed += sum(1 for x in f["failures"] if x["fixed_at"] is not None)
        constraints += len(f["constraints"])
        compactions += len(f["compactions"])
        for t in f["tallies"]:
            if t["output_chars"] > threshold:
                long_outputs += 1
                late += t["offset"] > threshold
    return {
        "sessions": len(manifest_rows),
        "messages": sum(r["messages"] for r in manifest_rows),
        "bytes": sum(r["bytes"] for r in manifest_rows),
        "formats": dict(Counter(r["format"] for r in manifest_rows)),
        "tallies": tallies,
        "failing_commands": failures,
        "failing_commands_fixed_later": fixed,
        "constraints": constraints,
        "recorded_compactions": compactions,
        "long_test_outputs": long_outputs,
        "long_test_outputs_tally_past_2000": late,
        "tally_past_2000_share": (late / long_outputs) if long_outputs else None,
    }


SHOW_SKIPPED = 20


def _count_reused_ids(sessions: Iterable[Session], counts: Counter) -> Iterator[Session]:
    for s in sessions:
        n = reused_call_ids(s.messages)
        if n:
            counts["sessions"] += 1
            counts["calls"] += n
        yield s


def _tell_skipped(read: ReadStats, source: Path | None) -> None:
    """Skipped records on stderr, each named; no session at all is an error, not a 0-session run."""
    for e in read.skipped[:SHOW_SKIPPED]:
        log(f"corpus: skipped {e}")
    if read.skipped:
        more = (
            f" ({read.skipped_count - SHOW_SKIPPED} more in manifest.json)"
            if read.skipped_count > SHOW_SKIPPED
            else ""
        )
        log(f"corpus: {read.summary()}{more}")
    if read.sessions == 0:
        why = (
            f"all {read.records} records were skipped, first: {read.skipped[0]}"
            if read.skipped
            else "it holds no records"
        )
        raise ValueError(f"{source}: no session to run ({why})")


def build_corpus(
    section: CorpusConfig,
    seed: int,
    out_dir: str | os.PathLike,
    source_path: Path | None = None,
    workers: int = 0,
    select=None,
) -> dict:
    """Write ``sessions.jsonl``, ``facts.jsonl`` and ``manifest.json`` into ``out_dir``.

    ``section`` is the experiment's ``[corpus]`` table: ``kind = "synth"`` generates
    ``sessions`` sessions from ``seed`` (``session_tokens``, when set, stops each at about that
    many tokens: small sessions for small windows); ``kind = "path"`` reads a canonical JSONL corpus,
    skipping (and counting) bad records when ``on_error = "skip"``. ``select(position)``, when
    given, keeps only the sessions at the corpus positions it accepts (a shard, :mod:`evalkit.pipeline.shard`).
    """
    from evalkit.common.progress import track
    from evalkit.common.workers import bounded_map, worker_pool

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kind = section.kind
    workers = workers or os.cpu_count() or 1
    read = ReadStats()
    reused: Counter = Counter()
    with (
        AtomicWriter(out / "sessions.jsonl") as sfh,
        AtomicWriter(out / "facts.jsonl") as ffh,
        worker_pool(workers) as pool,
    ):
        if kind == "synth":
            tokens = section.session_tokens
            jobs = [
                (seed, i, tokens)
                for i in range(section.sessions)
                if select is None or select(i)
            ]
            n = len(jobs)
            encoded = bounded_map(pool, _synth_one, jobs, 4 * workers)
        elif kind == "path":
            if source_path is None:
                raise ValueError("corpus kind 'path' needs corpus.path")
            # Canonical input is re-encoded so the run's copy is normalised and hashed the same way.
            sessions = _count_reused_ids(
                read_sessions(source_path, section.on_error, read), reused
            )
            if select is not None:
                sessions = (s for i, s in enumerate(sessions) if select(i))
            encoded = map(_encoded, sessions)
            n = None
        else:
            raise ValueError(f"corpus.kind must be 'synth' or 'path', not {kind!r}")
        rows, stats = _write_encoded(track(encoded, "corpus", total=n, unit="sessions"), sfh, ffh)
        if kind == "path":
            _tell_skipped(read, source_path)
            if reused:
                log(
                    f"corpus: warning: {reused['sessions']} sessions reuse tool-call ids across turns "
                    f"({reused['calls']} calls); kept, each result pairs with its own turn's call"
                )
    manifest = {
        "kind": kind,
        "seed": seed if kind == "synth" else None,
        "source": str(source_path) if source_path else "evalkit.corpus.synth",
        "stats": stats,
        "skipped": read.skipped_records(),
        "sessions": rows,
    }
    if reused:  # only then: an unchanged corpus keeps the manifest it had
        manifest["warnings"] = {"tool call id reused across turns": reused["calls"]}
    save_record(out / CorpusManifest.NAME, CorpusManifest, manifest)
    _drop_derived(out)
    return manifest


def write_corpus(
    sessions: Iterable[Session],
    out_dir: str | os.PathLike,
    source: str = "",
    kind: str = "import",
    extra=None,
) -> dict:
    """Stream ``sessions`` into a corpus folder (sessions, facts, manifest) in this process.

    The import path's counterpart of :func:`build_corpus`: one session is held at a time, so a
    large import runs in flat memory. ``extra`` is a callable returning manifest fields known only
    after the stream ends (an importer's report).
    """
    from evalkit.common.progress import track

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with AtomicWriter(out / "sessions.jsonl") as sfh, AtomicWriter(out / "facts.jsonl") as ffh:
        rows, stats = _write_encoded(map(_encoded, track(sessions, kind, unit="sessions")), sfh, ffh)
    manifest = {
        "kind": kind,
        "seed": None,
        "source": source,
        "stats": stats,
        "skipped": [],
        "sessions": rows,
        **(extra() if extra else {}),
    }
    save_record(out / CorpusManifest.NAME, CorpusManifest, manifest)
    _drop_derived(out)
    return manifest
