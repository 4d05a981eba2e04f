"""The exam question table: one row per question asked, per (arm, session, event, replicate).

An exam grades each question it asks; those grades are not metrics (a question is asked in one
session, so a metric per question grows with the corpus), so they live in ``questions.parquet``,
apart from ``metrics.parquet``. A row holds the exam (``identifier``, ``exam_offline``, ``exam``,
``judge_offline``, ``judge``), the question id, its kind, where it was asked and its grade; a
question that could not be graded has ``grade`` null and the reason in ``error``, never a 0.

``question`` is the id as the exam names it: ``<kind>:<hash>`` (identifier exam),
``<bank>/<id>@<message>`` (a bank question and the message it was asked at), ``<id>`` (the
generated exam). ``kind`` is the identifier's kind or the bank's name (null for the generated
exam, whose kinds are in ``corpus/questions.jsonl``). ``about`` says what the question asked
about (:mod:`evalkit.score.asked`): the identifier the identifier exam asked for, the generated
exam's or the bank question's text; null where the scorer had no source for it.

Version 2 added ``about`` (the file's schema metadata says ``evalkit.questions.version``); a
version-1 file reads with ``about`` null.

Probes hand their per-question grades to the score stage as rows named ``<exam>_q:<question>``
(:func:`evalkit.contracts.metrics.question_family`); the stage moves them here
(:func:`split`) before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalkit.contracts.metrics_stream import ROW_GROUP_ROWS, read_where

QUESTIONS_FILE = "questions.parquet"
VERSION = 2
SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("exam", pa.string()),
        ("question", pa.string()),
        ("kind", pa.string()),
        ("about", pa.string()),
        ("arm", pa.string()),
        ("session", pa.string()),
        ("event", pa.int64()),
        ("round", pa.int64()),
        ("replicate", pa.int64()),
        ("grade", pa.float64()),
        ("error", pa.string()),
    ],
    metadata={"evalkit.questions.version": str(VERSION)},
)
COLUMNS = SCHEMA.names


def is_question(metric: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Per row: whether a metric name is an exam question's (``<exam>_q:<question>``)."""
    head = pc.split_pattern(metric, ":", max_splits=1)
    first = pc.list_element(head, 0)
    return pc.and_(pc.greater(pc.list_value_length(head), 1), pc.ends_with(first, "_q"))


def split(rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Metric rows (the metrics file's schema) split into the metric rows proper and the exams'
    question rows (still in that schema: :func:`from_metric_rows` turns them into this table's)."""
    mask = pc.fill_null(is_question(rows.column("metric")), False)
    if rows.num_rows == 0 or not pc.any(mask).as_py():
        return rows, rows.slice(0, 0)
    return rows.filter(pc.invert(mask)), rows.filter(mask)


def from_metric_rows(rows: pa.Table, about: Callable[[str, str], str | None] | None = None) -> pa.Table:
    """``<exam>_q:<question>`` metric rows as question rows; ``about(session, question)`` (the
    question as this table names it) is what it asked about (:mod:`evalkit.score.asked`)."""
    parts = pc.split_pattern(rows.column("metric"), ":", max_splits=1)
    exam = pc.utf8_slice_codeunits(pc.list_element(parts, 0), 0, -2)  # "identifier_q" -> "identifier"
    question = pc.list_element(parts, 1)
    kind = pc.if_else(
        pc.equal(exam, "identifier"),
        pc.list_element(pc.split_pattern(question, ":", max_splits=1), 0),
        pc.if_else(
            pc.match_substring(question, "/"),
            pc.list_element(pc.split_pattern(question, "/", max_splits=1), 0),
            pa.scalar(None, pa.string()),
        ),
    )
    value = pc.cast(rows.column("value"), pa.float64())
    grade = pc.if_else(pc.is_valid(rows.column("error")), pa.scalar(None, pa.float64()), value)
    cols = {
        "run": rows.column("run"),
        "exam": exam,
        "question": question,
        "kind": kind,
        "about": pa.array(
            [
                about(s, q)
                for s, q in zip(rows.column("session").to_pylist(), question.to_pylist(), strict=True)
            ]
            if about
            else [None] * rows.num_rows,
            pa.string(),
        ),
        "arm": rows.column("arm"),
        "session": rows.column("session"),
        "event": rows.column("event"),
        "round": rows.column("round"),
        "replicate": rows.column("replicate"),
        "grade": grade,
        "error": rows.column("error"),
    }
    return pa.table([pc.cast(cols[f.name], f.type) for f in SCHEMA], schema=SCHEMA)


def metric_name(exam: str, question: str) -> str:
    """The name the exam's probe gave the question's row (``<exam>_q:<question>``)."""
    return f"{exam}_q:{question}"


def metric_rows(questions: pd.DataFrame) -> pd.DataFrame:
    """Question rows shown as the rows their probes named them (``<exam>_q:<question>``, with
    ``value`` the grade): for an export that lists a sample's scores and questions side by side."""
    out = questions.drop(columns=["exam", "question", "kind", "about", "grade"], errors="ignore")
    out["metric"] = [metric_name(e, q) for e, q in zip(questions["exam"], questions["question"], strict=True)]
    out["value"] = questions["grade"].astype(float)
    return out


def write(path: str | os.PathLike, tables: Iterable[pa.Table]) -> int:
    """Write question rows (streamed, in their order) as ``path``, atomically, in row groups of
    the metrics file's size (a group per arm and session, as they arrive, made the file 5x larger);
    returns the row count."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    n = 0
    pending: list[pa.Table] = []
    with pq.ParquetWriter(tmp, SCHEMA) as w:
        for t in tables:
            pending.append(t.cast(SCHEMA))
            n += t.num_rows
            if sum(x.num_rows for x in pending) >= ROW_GROUP_ROWS:
                w.write_table(pa.concat_tables(pending).combine_chunks(), row_group_size=ROW_GROUP_ROWS)
                pending = []
        if pending or not n:
            w.write_table(pa.concat_tables(pending or [SCHEMA.empty_table()]).combine_chunks())
    os.replace(tmp, p)
    return n


def merge_files(paths: list[Path], out: str | os.PathLike) -> int:
    """The question tables of shards (disjoint sessions) as one, in the order a run scored in
    one process writes it (its metric rows' canonical order); returns the row count."""
    t = pa.concat_tables([pq.read_table(p, schema=SCHEMA) for p in paths])
    name = pc.binary_join_element_wise(t.column("exam"), t.column("question"), "_q:")
    keyed = t.append_column("_name", name)
    order = pc.sort_indices(
        keyed, sort_keys=[(k, "ascending") for k in ("arm", "session", "event", "replicate", "_name")]
    )
    return write(out, [t.take(order)])


def _conform(t: pa.Table) -> pa.Table:
    """Question rows as this version's table: a column an older file lacks (``about``) is null."""
    cols = [t.column(f.name) if f.name in t.column_names else pa.nulls(t.num_rows, f.type) for f in SCHEMA]
    return pa.table(cols, schema=SCHEMA)


def _plain(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its dictionary columns as their values' type."""
    return pa.schema(
        [f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in schema]
    )


def path_of(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / QUESTIONS_FILE


def empty_frame() -> pd.DataFrame:
    """A question table without rows (its columns and types)."""
    return SCHEMA.empty_table().to_pandas()


def read(
    run_dir: str | os.PathLike,
    exams: tuple[str, ...] | None = None,
    arms: tuple[str, ...] | None = None,
    columns: list[str] | None = None,
    encoded: bool = False,
) -> pd.DataFrame:
    """The run's question table (only ``exams`` and ``arms``, when given: filtered as it is read,
    so a reader of a few arms does not hold every arm's rows). A run folder written before the
    table existed has its questions as ``<exam>_q:`` metric rows: they are read from there.
    ``columns``: only these (default: every column). ``encoded``: the text columns as categoricals
    over their sorted values (each distinct text held once, not once per row; comparisons,
    ``isin`` and ``.str`` work as on text, a groupby over them needs ``observed=True``)."""
    columns = columns or COLUMNS
    df = _read(run_dir, exams, arms, columns, encoded).select(columns).to_pandas()
    if encoded:
        for c in df.columns:
            if pa.types.is_string(SCHEMA.field(c).type):
                df[c] = pd.Categorical(df[c], categories=sorted(df[c].dropna().unique()))
    return df


def _read(
    run_dir: str | os.PathLike,
    exams: tuple[str, ...] | None,
    arms: tuple[str, ...] | None,
    columns: list[str],
    encoded: bool = False,
) -> pa.Table:
    p = path_of(run_dir)
    metrics = Path(run_dir) / "metrics.parquet"
    wanted = [(c, "in", list(v)) for c, v in (("exam", exams), ("arm", arms)) if v]
    try:
        if p.is_file() and wanted:
            # Only the columns asked for (and those filtered on) are decoded, a row group at a time.
            kept = [c for c in COLUMNS if c in columns or c in {c for c, _, _ in wanted}]
            present = [c for c in kept if c in pq.ParquetFile(p).schema_arrow.names]
            return _conform(read_where(p, {c: v for c, _, v in wanted}, present))
        if p.is_file():  # only the columns asked for are decoded, on one thread
            texts = [c for c in columns if pa.types.is_string(SCHEMA.field(c).type)] if encoded else None
            pf = pq.ParquetFile(p, read_dictionary=texts)
            present = [c for c in columns if c in pf.schema_arrow.names]  # version 1 lacks `about`
            t = pf.read(columns=present, use_threads=False)
            return t if present == columns else _conform(t.cast(_plain(t.schema)))
        if not metrics.is_file():
            return SCHEMA.empty_table()
        pf = pq.ParquetFile(metrics)
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        bad = p if p.is_file() else metrics
        raise ValueError(f"{bad}: cannot read the exam questions: {type(e).__name__}: {e}") from None
    parts = [split(pf.read_row_group(i))[1] for i in range(pf.num_row_groups)]
    t = from_metric_rows(pa.concat_tables(parts)) if parts else SCHEMA.empty_table()
    for column, _, values in wanted:
        t = t.filter(pc.is_in(t.column(column), pa.array(values)))
    return t
