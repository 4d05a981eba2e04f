"""sst/opencode sessions: the classic ``storage/`` folder tree, the SQLite ``opencode.db`` and the
JSON that ``opencode export`` prints (``{"info": session, "messages": [{"info", "parts"}]}``).

The database is the user's live store: it is never opened for writing. A WAL-mode database is
read from a private copy (database and ``-wal``), since even a read-only connection creates a
``-shm`` file beside it; without a ``-wal`` it is opened ``immutable``.

Both hold the same objects (session info, messages, parts); :func:`_session` maps one session's
messages and parts whichever store they came from. An assistant message holds several
``step-start … step-finish`` cycles (one per model call) with tool parts carrying both the call
and its result, so each step becomes an assistant message followed by its tool results. A
``compaction`` part on a user message plus the ``summary: true`` assistant message become one
:class:`Compaction`; a tool part left ``running``/``pending`` (session killed mid-call) becomes an
interrupted error result marked as a missing result (nothing of what the call did was recorded).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from evalkit.contracts.session import Compaction, Text, Thinking, ToolCall, ToolResult
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, as_int, as_text, short_id
from evalkit.importers.inputs import ImportReport, Probe

SQLITE_MAGIC = b"SQLite format 3\x00"
SKIPPED_PARTS = {"step-start", "step-finish", "snapshot", "patch", "agent", "retry", "subtask"}
INTERRUPTED = "[interrupted: the tool was still {status} when the session ended]"


# --------------------------------------------------------------------------- stores


def _storage_root(p: Path) -> Path | None:
    for root in (p, p / "storage"):
        if (root / "session").is_dir() and (root / "message").is_dir():
            return root
    return None


def _load(path: Path, report: ImportReport) -> dict | None:
    try:
        raw = path.read_bytes()
        d = json.loads(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError) as e:
        report.problem(
            path, 0, f"unreadable JSON ({type(e).__name__}: {e}); skipped", key="malformed JSON file"
        )
        return None
    if not isinstance(d, dict):
        report.problem(path, 0, "expected a JSON object; skipped", key="not a JSON object")
        return None
    return d


def _storage_sessions(
    root: Path, report: ImportReport
) -> Iterator[tuple[dict, list[tuple[dict, list[dict], str]], str]]:
    for sfile in sorted((root / "session").glob("*/*.json")):
        info = _load(sfile, report)
        if info is None:
            continue
        sid = info.get("id") or sfile.stem
        msgs = []
        for mfile in sorted((root / "message" / str(sid)).glob("*.json")):
            m = _load(mfile, report)
            if m is None:
                continue
            parts = [
                p
                for f in sorted((root / "part" / str(m.get("id", mfile.stem))).glob("*.json"))
                if (p := _load(f, report))
            ]
            msgs.append((m, parts, str(mfile)))
        yield info, msgs, str(sfile)


@contextlib.contextmanager
def _connect(db: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection that leaves nothing beside the user's database."""
    wal = db.with_name(db.name + "-wal")
    with contextlib.ExitStack() as stack:
        if wal.exists():
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="evalkit-opencode-")))
            shutil.copy2(db, tmp / db.name)
            shutil.copy2(wal, tmp / wal.name)
            con = sqlite3.connect(tmp / db.name)
        else:
            con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            yield con
        finally:
            con.close()


def _sqlite_sessions(
    db: Path, report: ImportReport
) -> Iterator[tuple[dict, list[tuple[dict, list[dict], str]], str]]:
    with _connect(db) as con:
        yield from _sqlite_rows(con, db, report)


def _sqlite_rows(
    con: sqlite3.Connection, db: Path, report: ImportReport
) -> Iterator[tuple[dict, list[tuple[dict, list[dict], str]], str]]:
    con.row_factory = sqlite3.Row
    sessions = con.execute("SELECT * FROM session ORDER BY time_created, id").fetchall()
    for srow in sessions:
        info = dict(zip(srow.keys(), tuple(srow), strict=True))
        info.setdefault("parentID", info.get("parent_id"))
        msgs = []
        for mrow in con.execute(
            "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id", (srow["id"],)
        ):
            where = f"{db}#message/{mrow['id']}"
            m = _row_data(mrow["data"], where, report)
            if m is None:
                continue
            m["id"] = mrow["id"]
            parts = []
            for prow in con.execute(
                "SELECT id, data FROM part WHERE message_id = ? ORDER BY id", (mrow["id"],)
            ):
                p = _row_data(prow["data"], f"{db}#part/{prow['id']}", report)
                if p is not None:
                    p["id"] = prow["id"]
                    parts.append(p)
            msgs.append((m, parts, where))
        yield info, msgs, f"{db}#session/{srow['id']}"


def _row_data(raw, where: str, report: ImportReport) -> dict | None:
    try:
        d = json.loads(raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw)
    except (TypeError, ValueError) as e:
        report.problem(where, 0, f"data column is not JSON ({e}); skipped", key="malformed JSON row")
        return None
    if not isinstance(d, dict):
        report.problem(where, 0, "data column is not a JSON object; skipped", key="not a JSON object")
        return None
    return d


# --------------------------------------------------------------------------- mapping


def _session(
    info: dict, msgs: list[tuple[dict, list[dict], str]], where: str, path: Path, report: ImportReport
):
    sid = short_id(str(info.get("id") or Path(where).stem))
    meta = {k: info[k] for k in ("title", "directory", "version") if isinstance(info.get(k), str)}
    parent = info.get("parentID")
    if isinstance(parent, str) and parent:
        meta["parent_session"] = parent
    b = SessionBuilder(report, "opencode", path, sid, meta=meta)
    pending: Compaction | None = None
    for m, parts, mwhere in msgs:
        role = m.get("role")
        if role == "user":
            if pending is not None:
                b.add("user", [pending], 0, {"synthetic": True})
                pending = None
            blocks = []
            for p in parts:
                kind = p.get("type")
                if kind == "text" and isinstance(p.get("text"), str):
                    blocks.append(Text(p["text"], bool(p.get("synthetic"))))
                elif kind == "file":
                    blocks.append(Text(f"[file: {p.get('filename') or p.get('url') or ''}]", True))
                elif kind == "compaction":
                    pending = Compaction("", None, None, "auto" if p.get("auto", True) else "manual")
                elif kind in SKIPPED_PARTS:
                    report.skip(mwhere, 0, f"opencode {kind} part")
                else:
                    report.problem(mwhere, 0, f"unknown part type {kind!r}; skipped", key="unknown part type")
            b.add("user", blocks, 0)
        elif role == "assistant":
            if m.get("summary") is True:
                text = "\n".join(
                    p.get("text", "")
                    for p in parts
                    if p.get("type") == "text" and isinstance(p.get("text"), str)
                )
                tokens = m.get("tokens") if isinstance(m.get("tokens"), dict) else {}
                c = pending or Compaction("", None, None, "auto")
                b.add(
                    "user",
                    [
                        Compaction(
                            text,
                            c.tokens_before or as_int(tokens.get("input")),
                            as_int(tokens.get("output")),
                            c.trigger,
                        )
                    ],
                    0,
                    {"synthetic": True},
                )
                pending = None
                continue
            _assistant(b, m, parts, mwhere, report)
        else:
            report.problem(mwhere, 0, f"message with unknown role {role!r}; skipped", key="unknown role")
    if pending is not None:
        b.add("user", [pending], 0, {"synthetic": True})
    return b.finish()


def _assistant(b: SessionBuilder, m: dict, parts: list[dict], where: str, report: ImportReport) -> None:
    meta = {"model": m["modelID"]} if isinstance(m.get("modelID"), str) else {}
    err = m.get("error")
    if isinstance(err, dict) and err.get("name"):
        meta["error"] = err["name"]
    blocks: list = []
    results: list[ToolResult] = []

    def flush() -> None:
        nonlocal blocks, results
        if blocks:
            b.add("assistant", blocks, 0, meta)
            for r in results:
                b.add(
                    "tool",
                    [r],
                    0,
                    # Killed mid-call: no result was recorded, so nothing is known of what the call
                    # did (the facts read it as a call with no result, not as a failure).
                    {"synthetic": True, "interrupted": True, "missing_result": True}
                    if r.output.startswith("[interrupted")
                    else None,
                )
        blocks, results = [], []

    for p in parts:
        kind = p.get("type")
        if kind == "step-start":
            flush()
        elif kind == "text" and isinstance(p.get("text"), str) and p["text"].strip():
            if results:
                flush()
            blocks.append(Text(p["text"], bool(p.get("synthetic"))))
        elif kind == "reasoning" and isinstance(p.get("text"), str) and p["text"].strip():
            if results:
                flush()
            blocks.append(Thinking(p["text"]))
        elif kind == "tool":
            state = p.get("state") if isinstance(p.get("state"), dict) else {}
            cid = p.get("callID") or p.get("id")
            if not isinstance(cid, str):
                report.problem(where, 0, "tool part without callID; skipped", key="malformed tool call")
                continue
            args = state.get("input")
            blocks.append(ToolCall(cid, str(p.get("tool", "")), args if isinstance(args, dict) else {}))
            status = state.get("status")
            md = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
            if status == "completed":
                results.append(ToolResult(cid, as_text(state.get("output")), False, as_int(md.get("exit"))))
            elif status == "error":
                results.append(
                    ToolResult(cid, as_text(state.get("error")) or "error", True, as_int(md.get("exit")))
                )
            else:
                report.skip(where, 0, f"opencode tool part left {status} (interrupted)")
                results.append(ToolResult(cid, INTERRUPTED.format(status=status), True, None))
        elif kind in SKIPPED_PARTS:
            report.skip(where, 0, f"opencode {kind} part")
        elif kind not in ("text", "reasoning"):
            report.problem(where, 0, f"unknown part type {kind!r}; skipped", key="unknown part type")
    flush()


# --------------------------------------------------------------------------- registration


def _is_export(d) -> bool:
    """``opencode export``'s shape: session info plus messages that each hold info and parts."""
    if (
        not isinstance(d, dict)
        or not isinstance(d.get("info"), dict)
        or not isinstance(d.get("messages"), list)
    ):
        return False
    msgs = d["messages"]
    return all(
        isinstance(m, dict) and isinstance(m.get("info"), dict) and isinstance(m.get("parts"), list)
        for m in msgs[:5]
    )


def detect(probe: Probe) -> bool:
    if probe.path.is_dir():
        return _storage_root(probe.path) is not None
    if probe.looks_json():
        head = probe.head_text.lstrip()
        return head.startswith("{") and '"messages"' in head and '"info"' in head and _is_export(probe.json)
    if not probe.head.startswith(SQLITE_MAGIC):
        return False
    with _connect(probe.path) as con:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return {"session", "message", "part"} <= names


def read_export(probe: Probe, report: ImportReport, options: dict):
    d = probe.json
    if not _is_export(d):
        report.problem(
            probe.path, 0, "not an opencode export (info + messages[info, parts])", key="file skipped"
        )
        return
    msgs = [
        (m["info"], m["parts"], f"{probe.path}#message/{m['info'].get('id', k)}")
        for k, m in enumerate(d["messages"])
    ]
    s = _session(d["info"], msgs, str(probe.path), probe.path, report)
    if s:
        yield s


def read_folder(probe: Probe, report: ImportReport, options: dict):
    root = _storage_root(probe.path)
    if root is None:
        report.problem(
            probe.path, 0, "not an opencode storage folder (no session/ and message/)", key="file skipped"
        )
        return
    for info, msgs, where in _storage_sessions(root, report):
        s = _session(info, msgs, where, probe.path, report)
        if s:
            yield s


def read_db(probe: Probe, report: ImportReport, options: dict):
    try:
        for info, msgs, where in _sqlite_sessions(probe.path, report):
            s = _session(info, msgs, where, probe.path, report)
            if s:
                yield s
    except sqlite3.DatabaseError as e:
        report.problem(probe.path, 0, f"SQLite error: {e}", key="unreadable database")


def read(probe: Probe, report: ImportReport, options: dict):
    if probe.path.is_dir():
        return read_folder(probe, report, options)
    return read_export(probe, report, options) if probe.looks_json() else read_db(probe, report, options)


IMPORTER = register(
    Importer(
        "opencode",
        "sst/opencode sessions: the storage/ tree, the SQLite opencode.db, or `opencode export` JSON",
        detect,
        read,
        folder=None,
    )
)
