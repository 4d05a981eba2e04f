"""The metrics file written from sorted streams, so no stage holds the whole table.

A run's table grows with its corpus (~1,200 rows a session at 3 arms, ~1M rows at 800 sessions),
and the canonical order (:data:`evalkit.contracts.metrics.ORDER`) is arm-major while rows arrive session by
session. :class:`ArmSpill` keeps what arrives on disk, one Arrow IPC file per arm; since sessions
arrive in id order, each arm's file is already in canonical order and reading the arms in order is
the sorted table, one session's rows at a time. :func:`write_sorted` merges such streams by
(arm, session) into a parquet file of fixed-size row groups: the bytes depend only on the rows, so
a run scored in one process, in shards or on Ray writes the same file.
"""

from __future__ import annotations

import heapq
import itertools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalkit.contracts.metrics import COLUMNS, DTYPES, ORDER, arrow_schema

# Rows per parquet row group: what a reader decodes at a time when it streams the file. Small,
# because a run of sessions (session_chunks) reads the row groups its ids fall in for every arm.
ROW_GROUP_ROWS = 8_192


def sort_rows(table: pa.Table) -> pa.Table:
    """``table`` in canonical row order (stable: rows with equal keys keep their order)."""
    return table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in ORDER]))


class ArmSpill:
    """Rows that arrive a session at a time (every arm), kept on disk as one Arrow file per arm.

    Add sessions in ascending id order and each arm's file is in canonical order; an arm whose
    sessions came out of order is sorted whole when read (correct, but it holds that arm)."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self._writers: dict[str, pa.ipc.RecordBatchFileWriter] = {}
        self._files: dict[str, Path] = {}
        self._last: dict[str, str] = {}
        self._unsorted: set[str] = set()
        self.num_rows = 0

    def add(self, table: pa.Table) -> None:
        """One session's rows (any number of arms)."""
        if table.num_rows == 0:
            return
        table = sort_rows(table.cast(arrow_schema()))
        for lo, hi in _runs(table, ("arm",)):
            part = table.slice(lo, hi - lo)
            arm = part["arm"][0].as_py()
            first, last = part["session"][0].as_py(), part["session"][-1].as_py()
            if arm in self._last and first < self._last[arm]:
                self._unsorted.add(arm)
            self._last[arm] = max(last, self._last.get(arm, last))
            if arm not in self._writers:
                self._files[arm] = self.dir / f"{len(self._files)}.arrow"  # arm names may hold any character
                self._writers[arm] = pa.ipc.new_file(self._files[arm], arrow_schema())
            try:
                self._writers[arm].write_table(part)
            except OSError as e:  # a full disk: pyarrow's message names no file
                raise OSError(e.errno, f"{self._files[arm]}: cannot write metric rows ({e})") from None
        self.num_rows += table.num_rows

    def close(self) -> None:
        """Finish the files (before reading them)."""
        for w in self._writers.values():
            w.close()
        self._writers.clear()

    def tables(self) -> Iterator[pa.Table]:
        """The rows in canonical order, a batch (one session of one arm) at a time."""
        self.close()
        for arm in sorted(self._files):
            with pa.OSFile(str(self._files[arm])) as source:
                reader = pa.ipc.open_file(source)
                if arm in self._unsorted:
                    yield sort_rows(reader.read_all())
                    continue
                for i in range(reader.num_record_batches):
                    yield pa.Table.from_batches([reader.get_batch(i)])

    def remove(self) -> None:
        """Delete the spill files."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def read_where(path: str | os.PathLike, where: dict[str, list], columns: list[str] | None = None) -> pa.Table:
    """The rows of a parquet file (``columns`` of them, which must hold ``where``'s) whose every
    ``where`` column holds one of its values, in the file's order. Read a row group at a time on
    one thread: a filtered dataset scan kept decoded batches in flight in proportion to the file
    (+13 MB of peak RSS for a 4x larger metrics table), where this holds one row group."""
    pf = pq.ParquetFile(path)
    parts = []
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i, columns=columns, use_threads=False)
        keep = None
        for c, values in where.items():
            hit = pc.is_in(t.column(c), value_set=pa.array(values, t.schema.field(c).type))
            keep = hit if keep is None else pc.and_(keep, hit)
        parts.append(t.filter(keep) if keep is not None else t)
    if parts:
        return pa.concat_tables(parts)
    schema = pf.schema_arrow
    return schema.empty_table().select(columns) if columns else schema.empty_table()


def file_tables(path: str | os.PathLike, keep: Callable[[str], bool] | None = None) -> Iterator[pa.Table]:
    """A metrics file's rows a row group at a time (in its order), only metrics ``keep`` accepts."""
    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i).cast(arrow_schema())
        if keep is not None:
            names = t.column("metric").unique()
            drop = pa.array([m for m in names.to_pylist() if not keep(m)], type=names.type)
            if len(drop):
                t = t.filter(pc.invert(pc.is_in(t.column("metric"), value_set=drop)))
        yield t


def write_sorted(path: str | os.PathLike, sources: Iterable[Iterable[pa.Table]]) -> int:
    """Merge streams of rows, each in canonical order, into the parquet file at ``path``
    (atomically); returns the row count. Rows of one (arm, session) from several streams are
    joined in the streams' order and sorted stably, as sorting their concatenation would."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    merged = heapq.merge(*(_sessions(s) for s in sources), key=lambda kt: kt[0])
    pending: list[pa.Table] = []
    held = total = 0
    with pq.ParquetWriter(tmp, arrow_schema()) as writer:
        for _, group in itertools.groupby(merged, key=lambda kt: kt[0]):
            parts = [t for _, t in group]
            t = parts[0] if len(parts) == 1 else sort_rows(pa.concat_tables(parts))
            pending.append(t)
            held += t.num_rows
            total += t.num_rows
            while held >= ROW_GROUP_ROWS:
                block = pa.concat_tables(pending)
                writer.write_table(block.slice(0, ROW_GROUP_ROWS).combine_chunks())
                rest = block.slice(ROW_GROUP_ROWS)
                pending, held = [rest], rest.num_rows
        if held or not total:  # an empty table still writes its schema
            writer.write_table(pa.concat_tables(pending or [arrow_schema().empty_table()]).combine_chunks())
    os.replace(tmp, p)
    return total


def _sessions(tables: Iterable[pa.Table]) -> Iterator[tuple[tuple[str, str], pa.Table]]:
    """A canonical stream cut at every change of (arm, session): ((arm, session), rows) in order."""
    carry: pa.Table | None = None
    for t in tables:
        if t.num_rows == 0:
            continue
        t = t.cast(arrow_schema())
        if carry is not None:
            t = pa.concat_tables([carry, t])
        runs = _runs(t, ("arm", "session"))
        for lo, hi in runs[:-1]:
            yield _key(t, lo), t.slice(lo, hi - lo)
        lo, hi = runs[-1]
        carry = t.slice(lo, hi - lo)  # the last run may go on in the next table
    if carry is not None:
        yield _key(carry, 0), carry


def _key(t: pa.Table, i: int) -> tuple[str, str]:
    return t["arm"][i].as_py(), t["session"][i].as_py()


def _runs(t: pa.Table, columns: tuple[str, ...]) -> list[tuple[int, int]]:
    """The [lo, hi) row ranges over which ``columns`` keep one value (the table is sorted by them)."""
    n = t.num_rows
    change = np.zeros(max(n - 1, 0), dtype=bool)
    for c in columns:
        col = t.column(c).combine_chunks()
        differs = pc.fill_null(pc.not_equal(col.slice(1), col.slice(0, n - 1)), True)
        change |= differs.to_numpy(zero_copy_only=False)
    cuts = [0, *(np.flatnonzero(change) + 1).tolist(), n]
    return list(itertools.pairwise(cuts))


# Rows a reader holds at once when it walks a metrics file session by session (session_chunks):
# what the decide stage builds from a chunk grows with it, so this bounds its memory. Smaller
# chunks cost time (each pairs its own frame): on the default run (16 arms, 388,000 rows) the
# decide stage took 5.9 s at 100,000 rows a chunk and 10.0 s at 25,000.
CHUNK_ROWS = 50_000


def file_sessions(path: str | os.PathLike) -> dict[str, int]:
    """Session id → its row count in a metrics file, in id order (ids read a row group at a time)."""
    pf = pq.ParquetFile(path)
    counts: dict[str, int] = {}
    for i in range(pf.num_row_groups):
        vc = pc.value_counts(pf.read_row_group(i, columns=["session"]).column("session"))
        for sid, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True):
            if sid is not None:
                counts[sid] = counts.get(sid, 0) + n
    return dict(sorted(counts.items()))


def session_chunks(
    path: str | os.PathLike, columns: list[str] | None = None, rows: int | None = None
) -> Iterator[pa.Table]:
    """A metrics file as tables of whole sessions (every arm's rows of a run of session ids), of at
    most ``rows`` rows (default :data:`CHUNK_ROWS`) unless one session has more: a reader that needs
    a session's arms side by side holds one chunk, not the table. Only the row groups whose session
    range (their statistics) meets a chunk's are read, so a chunk costs its own rows plus at most
    two row groups per arm."""
    # Mapped and decoded on one thread: read into buffers by a thread pool, each chunk's row
    # groups left the driver's heap higher (health's peak on the default run: +139 MB, +97 so).
    pf = pq.ParquetFile(path, memory_map=True)
    sessions = file_sessions(path)
    schema = _schema_of(columns)
    if not sessions:
        yield pf.read(columns=columns).cast(schema)
        return
    ranges = _session_ranges(pf)
    for lo, hi in _runs_of_sessions(sessions, rows or CHUNK_ROWS):
        groups = [g for g, r in enumerate(ranges) if r is None or not (r[1] < lo or r[0] > hi)]
        cols = sorted({*(columns or COLUMNS), "session"})
        # A row group at a time, filtered as it comes: a group spanning every session (an arm
        # with few rows) is read for every chunk, and whole it was most of the chunk.
        parts = []
        for g in groups:
            t = pf.read_row_group(g, columns=cols, use_threads=False)
            sid = t.column("session")
            parts.append(t.filter(pc.and_(pc.greater_equal(sid, lo), pc.less_equal(sid, hi))))
        t = pa.concat_tables(parts) if parts else pf.schema_arrow.empty_table().select(cols)
        yield t.select(columns or COLUMNS).cast(schema)


def _runs_of_sessions(sessions: dict[str, int], rows: int) -> list[tuple[str, str]]:
    """(first, last) ids of consecutive sessions whose rows add up to at most ``rows`` (or one session)."""
    out, first, last, held = [], None, None, 0
    for sid, n in sessions.items():
        if first is not None and held + n > rows:
            out.append((first, last))
            first, held = None, 0
        first = sid if first is None else first
        last, held = sid, held + n
    out.append((first, last))
    return out


def _session_ranges(pf: pq.ParquetFile) -> list[tuple[str, str] | None]:
    """Per row group, the (min, max) session id from its statistics (None: not recorded)."""
    j = pf.schema_arrow.get_field_index("session")
    out: list[tuple[str, str] | None] = []
    for g in range(pf.num_row_groups):
        st = pf.metadata.row_group(g).column(j).statistics
        out.append((st.min, st.max) if st is not None and st.has_min_max else None)
    return out


def _schema_of(columns: list[str] | None) -> pa.Schema:
    schema = arrow_schema()
    if columns is None:
        return schema
    return pa.schema([schema.field(c) for c in columns], metadata=None)


def write_table(table: pa.Table, path: str | os.PathLike) -> None:
    """Write an Arrow metrics table as parquet, atomically, in canonical row order (stable, as
    :func:`normalize`), in the row groups every metrics file has."""
    write_sorted(path, [[sort_rows(table)]])


def write_metrics(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write the table as parquet, atomically."""
    write_table(pa.Table.from_pandas(df[COLUMNS].astype(DTYPES), preserve_index=False), path)


def replace_rows(path: str | os.PathLike, rows: pa.Table | Iterable[pa.Table], owned) -> int:
    """Write ``rows`` into the metrics file in place of the rows whose metric ``owned(metric)``
    claims, keeping every other stage's rows (probes and continuation share one table); returns the
    file's row count. ``rows`` is a table (from :func:`rows_to_arrow`) or a stream of tables in
    canonical order (:class:`evalkit.contracts.metrics_stream.ArmSpill`); the old file is read a row group
    at a time, so neither side is held whole."""
    p = Path(path)
    new = [sort_rows(rows)] if isinstance(rows, pa.Table) else rows
    old = file_tables(p, keep=lambda m: not owned(m)) if p.exists() else []
    return write_sorted(p, [old, new])
