"""Hugging Face ``datasets`` datasets whose rows hold chat messages (saved with
``save_to_disk``, or parquet/JSON files loaded by ``datasets``).

Each row is one session; its messages go through the shared OpenAI mapping. Column names are
options: ``messages_column`` (default ``messages``) and ``id_column`` (default: the first of
``id``, ``session_id``, ``instance_id`` present; else the row number). Rows may also hold the
messages as a JSON string.
"""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.importers import Importer, register
from evalkit.importers.building import short_id
from evalkit.importers.inputs import ImportReport, Probe

ID_COLUMNS = ("id", "session_id", "instance_id")


def detect(probe: Probe) -> bool:
    p = probe.path
    if not p.is_dir():
        return False
    # A canonical corpus exported by evalkit.dataset is also a dataset, but of sessions.
    return (
        (p / "dataset_info.json").is_file()
        or (p / "state.json").is_file()
        or (p / "dataset_dict.json").is_file()
    )


def load(path: Path):
    """The dataset at ``path`` (``save_to_disk`` folder, or a parquet / JSON(L) file or folder)."""
    import datasets

    if path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file()):
        ds = datasets.load_from_disk(str(path))
    else:
        files = [str(f) for f in sorted(path.glob("*.parquet"))] if path.is_dir() else [str(path)]
        kind = "parquet" if files and files[0].endswith(".parquet") else "json"
        ds = datasets.load_dataset(kind, data_files=files, split="train")
    if isinstance(ds, datasets.DatasetDict):
        ds = datasets.concatenate_datasets(list(ds.values()))
    return ds


def read(probe: Probe, report: ImportReport, options: dict):
    from evalkit.importers.openai import session_from_messages

    ds = load(probe.path)
    col = options.get("messages_column", "messages")
    if col not in ds.column_names:
        report.problem(
            probe.path,
            0,
            f"no column {col!r} (columns: {', '.join(ds.column_names)}); set messages_column",
            key="missing messages column",
        )
        return
    id_col = options.get("id_column") or next((c for c in ID_COLUMNS if c in ds.column_names), None)
    for i, row in enumerate(ds):
        msgs = row[col]
        if isinstance(msgs, str):
            try:
                msgs = json.loads(msgs)
            except ValueError as e:
                report.problem(
                    probe.path, i + 1, f"row {i}: {col} is not JSON ({e}); skipped", key="malformed messages"
                )
                continue
        if not isinstance(msgs, list):
            report.problem(
                probe.path, i + 1, f"row {i}: {col} is not a list; skipped", key="malformed messages"
            )
            continue
        # Arrow fills absent struct fields with None; drop them so the mapping sees the original shape.
        msgs = [{k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m for m in msgs]
        sid = short_id(str(row[id_col])) if id_col else f"{short_id(probe.path.name)}:{i}"
        s = session_from_messages(msgs, report, "hf", probe.path, sid, line=i + 1)
        if s:
            yield s


IMPORTER = register(
    Importer(
        "hf",
        "a Hugging Face datasets dataset (local folder) whose rows hold OpenAI-style messages",
        detect,
        read,
        folder=True,
        options={
            "messages_column": "column holding the messages (default: messages)",
            "id_column": "column holding the session id",
        },
    )
)
