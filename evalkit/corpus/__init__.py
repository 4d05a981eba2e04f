"""The corpus stage: canonical session files (:mod:`.io`), building a corpus folder (:mod:`.build`),
the synthetic generator (:mod:`.synth`), its comparison with a real corpus (:mod:`.compare`) and
the ``datasets``/parquet bridge (:mod:`.dataset`).

A corpus folder holds ``sessions.jsonl`` (one session per line), ``facts.jsonl`` (the ground
truth derived once per session) and ``manifest.json`` (ids, content hashes and counts).
"""

from evalkit.common.files import AtomicWriter, Span, index_jsonl, jsonl_lines, read_span, write_json
from evalkit.corpus.build import QUESTIONS, build_corpus, corpus_stats, write_corpus
from evalkit.corpus.io import (
    MAX_RECORD_BYTES,
    CorpusError,
    ReadStats,
    parse_line,
    read_sessions,
    session_hash,
    write_sessions,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "QUESTIONS",
    "AtomicWriter",
    "CorpusError",
    "ReadStats",
    "Span",
    "build_corpus",
    "corpus_stats",
    "index_jsonl",
    "jsonl_lines",
    "parse_line",
    "read_sessions",
    "read_span",
    "session_hash",
    "write_corpus",
    "write_json",
    "write_sessions",
]
