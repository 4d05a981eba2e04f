"""``evalkit merge SHARD... --out RUN``: shard run folders → the run folder decide and report read.

The merge is deterministic: sessions, facts, events, continuation logs and judgements are dealt
back into corpus order (:func:`evalkit.pipeline.shard.interleave`), metric rows go through the metrics
table's canonical order, the shards' aggregates (:mod:`evalkit.contracts.aggregate`) are merged,
exam question rows are put in the order a local run writes them, counts are summed, and each shard's call cache is joined into the run's
own. The result is byte-identical to a local run's ``metrics.parquet`` and ``decision.json``.
It refuses shards of different configs, a shard listed twice, an unfinished or missing shard,
and says which (:class:`MergeError`, exit code 2).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

from evalkit.common.files import AtomicWriter, write_json
from evalkit.contracts.config import Experiment, validate_config
from evalkit.contracts.records import ContinuationManifest, CorpusManifest, RunConfig, ShardMarker, Timings
from evalkit.contracts.runs import RunPaths, load_run, read_record, run_config, write_record
from evalkit.pipeline.shard import interleave


class MergeError(ValueError):
    """Shards that cannot be merged; the message names the shard folder and what is wrong."""


# Run-folder JSONL files whose lines each carry a "session" field (corpus lines carry "id").
SESSION_FILES = ("corpus/facts.jsonl", "continuation/log.jsonl", "judgements.jsonl")


def check_shards(dirs: list[str | Path]) -> list[tuple[Path, ShardMarker]]:
    """The shards ordered by index, after checking they are finished shards of one config that
    together cover 1..n exactly once."""
    found: list[tuple[Path, ShardMarker]] = []
    for given in dirs:
        run = load_run(given)  # an empty name, a missing or foreign folder: an error naming it
        d, m = run.path, run.shard  # a marker without config_hash, shards or shard: an error naming it
        if m is None:
            raise MergeError(
                f"{d}: unfinished (no {ShardMarker.FILE}); run `evalkit run --shard K/N --resume` there to finish it"
            )
        found.append((d, m))
    d0, m0 = found[0]
    for d, m in found[1:]:
        if m.config_hash != m0.config_hash:
            raise MergeError(
                f"{d}: shard of another config ({m.config_hash[:8]}; {d0} is {m0.config_hash[:8]})"
            )
        if m.shards != m0.shards:
            raise MergeError(f"{d}: shard {m.shard}/{m.shards} does not match {d0} (of {m0.shards})")
    by_index: dict[int, Path] = {}
    for d, m in found:
        if m.shard in by_index:
            raise MergeError(f"{d}: shard {m.shard}/{m.shards} given twice (also {by_index[m.shard]})")
        by_index[m.shard] = d
    missing = [k for k in range(1, m0.shards + 1) if k not in by_index]
    if missing:
        n = m0.shards
        raise MergeError(
            f"missing shard(s) {', '.join(f'{k}/{n}' for k in missing)} of config {m0.config_hash[:8]}"
        )
    return sorted(found, key=lambda x: x[1].shard)


_SESSION = re.compile(rb'"session"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _lines_by_session(path: Path) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = defaultdict(list)
    if path.is_file():
        with open(path, "rb") as fh:
            for line in fh:
                m = _SESSION.search(line[:4096])
                out[json.loads(b'"' + m.group(1) + b'"') if m else ""].append(line)
    return out


def _write_in_order(out: Path, shard_files: list[Path], order: list[str], sort: bool = False) -> None:
    """Concatenate the shards' lines of one file, session by session in corpus order."""
    if not any(p.is_file() for p in shard_files):
        return
    groups: dict[str, list[bytes]] = defaultdict(list)
    for p in shard_files:
        for sid, lines in _lines_by_session(p).items():
            groups[sid].extend(lines)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as fh:
        for sid in sorted(groups) if sort else order:
            fh.writelines(groups.get(sid, []))
    tmp.replace(out)


def _merge_corpus(shards: list[Path], out: Path, count: int) -> list[str]:
    from evalkit.corpus.build import corpus_stats

    manifests = [read_record(d, CorpusManifest, required=True).model_dump(exclude_unset=True) for d in shards]
    rows = interleave([m["sessions"] for m in manifests], count)
    lines = interleave(
        [(d / "corpus" / "sessions.jsonl").read_bytes().splitlines(keepends=True) for d in shards], count
    )
    facts = interleave(
        [(d / "corpus" / "facts.jsonl").read_bytes().splitlines(keepends=True) for d in shards], count
    )
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    for name, body in (("sessions.jsonl", lines), ("facts.jsonl", facts)):
        with AtomicWriter(out / "corpus" / name) as fh:
            fh.write(b"".join(body).decode("utf-8"))
    # Every shard read the whole source, so its skipped records are the same in each.
    manifest = {**manifests[0], "sessions": rows, "stats": corpus_stats((json.loads(f) for f in facts), rows)}
    write_record(out, CorpusManifest, manifest)
    _write_in_order(
        out / "corpus" / "questions.jsonl", [d / "corpus" / "questions.jsonl" for d in shards], [], sort=True
    )
    # Each shard pinned the bank questions of its own sessions: the run's are their union.
    from evalkit.score.banks import BANKS_FILE, save_run_banks

    banks: dict = {}
    for d in shards:
        if (d / "corpus" / BANKS_FILE).is_file():
            banks.update(json.loads((d / "corpus" / BANKS_FILE).read_text(encoding="utf-8")))
    if banks:
        save_run_banks(out, banks)
    return [r["id"] for r in rows]


def _merge_tables(paths: list[Path], out: Path) -> None:
    """The shards' metrics files (each in canonical order) merged a row group at a time."""
    from evalkit.contracts.metrics_stream import file_tables, write_sorted

    found = [p for p in paths if p.is_file()]
    if found:
        write_sorted(out, [file_tables(p) for p in found])


def _sum_counts(dicts: list[dict]) -> dict:
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


def _read_json(p: Path) -> dict | None:
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def merge_shards(dirs: list[str | Path], out_dir: str | Path, argv: list[str] | None = None) -> Path:
    """Merge finished shard folders into ``out_dir`` and run health, decide and report there."""
    from evalkit.contracts.event import events_path
    from evalkit.models.cache_merge import merge_caches
    from evalkit.pipeline.run import (
        stage_decide,
        stage_health,
        stage_report,
        write_model_call_stats,
    )

    t0 = time.perf_counter()
    if not str(out_dir).strip():
        raise MergeError("merge: --out '': empty path")
    shards = check_shards(list(dirs))
    count = shards[0][1].shards
    sdirs = [d for d, _ in shards]
    out = Path(out_dir)
    if out.exists() and any(out.resolve() == d.resolve() for d in sdirs):
        raise MergeError(f"{out}: --out must not be one of the shards")
    out.mkdir(parents=True, exist_ok=True)
    conf = run_config(sdirs[0]).model_dump(exclude_unset=True)
    conf["command"] = "evalkit " + " ".join(argv or ["merge", *map(str, dirs), "--out", str(out)])
    conf["shards"] = [str(d) for d in sdirs]
    write_record(out, RunConfig, conf)
    order = _merge_corpus(sdirs, out, count)
    arms = list(conf["config"]["replay"]["arms"])
    for a in arms:
        _write_in_order(events_path(out, a), [events_path(d, a) for d in sdirs], order)
    nothing = [_read_json(d / "events" / "recorded_nothing_to_summarize.json") or {} for d in sdirs]
    if any(nothing):
        write_json(out / "events" / "recorded_nothing_to_summarize.json", _sum_counts(nothing))
    _merge_tables([RunPaths(d).metrics for d in sdirs], RunPaths(out).metrics)
    from evalkit.contracts import aggregate, questions

    if RunPaths(out).metrics.is_file():
        # Each shard's aggregate describes its own rows: added up, they are the run's (no pass over the rows).
        aggregate.write(out, aggregate.merge(*(aggregate.load(d) for d in sdirs)))
    asked = [questions.path_of(d) for d in sdirs if questions.path_of(d).is_file()]
    if asked:
        questions.merge_files(asked, questions.path_of(out))
    for name in SESSION_FILES:
        _write_in_order(out / name, [d / name for d in sdirs], order)
    conts = [read_record(d, ContinuationManifest) for d in sdirs]
    if all(conts):
        conts = [c.model_dump(exclude_unset=True) for c in conts]
        _merge_tables([RunPaths(d).continuation_metrics for d in sdirs], RunPaths(out).continuation_metrics)
        manifest = {**conts[0], "counts": _sum_counts([c["counts"] for c in conts])}
        manifest["rows"] = sum(c["rows"] for c in conts)
        manifest["seconds"] = round(sum(c["seconds"] for c in conts), 3)
        write_record(out, ContinuationManifest, manifest)
    caches = [RunPaths(d).call_cache for d in sdirs if RunPaths(d).call_cache.is_file()]
    if caches:
        merge_caches(caches, RunPaths(out).call_cache)
    config = validate_config(conf["config"], f"{sdirs[0] / RunPaths.CONFIG}: config")
    exp = Experiment(config, conf["source"], Path(shards[0][1].root or "."))
    paths = RunPaths(out)
    write_model_call_stats(exp, paths)
    timings = _sum_counts([t.stages() if (t := read_record(d, Timings)) else {} for d in sdirs])
    start = time.perf_counter()
    stage_health(exp, paths)
    stage_decide(exp, paths)
    timings.update(merge=round(start - t0, 3), decide=round(time.perf_counter() - start, 3))
    write_record(out, Timings, timings)
    from evalkit.pipeline import warnings as run_warnings

    # As a plain run does: the report's "Read these first" and the stderr summary read them.
    body = run_warnings.write(out, config)
    stage_report(exp, paths)
    for line in run_warnings.summary_lines(body):
        print(line, file=sys.stderr)
    return out
