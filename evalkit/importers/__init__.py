"""Importers: real agent session formats into canonical sessions.

Each format is one small module registering an :class:`Importer` (name, one-line description, a
content-based ``detect`` and a streaming ``read``) in :data:`IMPORTERS`. :func:`import_paths` walks
files and folders, picks the importer (given or detected from content, never from the file
name), applies redaction, and counts everything in an :class:`ImportReport`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.common.registry import Registry
from evalkit.contracts.session import Session
from evalkit.importers.inputs import UNRECOGNISED, ImportReport, Issue, Probe


@dataclass(frozen=True)
class Importer:
    """A registered format: ``detect(probe)`` from content, ``read(probe, report, options)`` streams sessions.

    ``folder`` importers take a whole folder as one input (opencode's ``storage/`` tree, a saved
    ``datasets`` dataset); the others take files; ``folder=None`` takes either.
    """

    name: str
    description: str
    detect: Callable[[Probe], bool]
    read: Callable[[Probe, ImportReport, dict], Iterator[Session]]
    folder: bool | None = False  # True: folders only, False: files only, None: both
    options: dict[str, str] = field(default_factory=dict)  # option name -> what it sets


# Detection order: the most specific formats first (a SWE-agent .traj also looks like OpenAI chat).
MODULES = [
    "opencode",
    "hf",
    "inspect_ai",
    "aider",
    "cline",
    "codex",
    "gemini_cli",
    "claude_code",
    "openhands",
    "mini_swe_agent",
    "swe_agent",
    "openai",
]


def _name(module: str) -> str:
    return module.replace("_", "-").replace("inspect-ai", "inspect")


# Built-ins by name, each module's IMPORTER, imported on first lookup (no import side effects).
IMPORTERS: Registry[Importer] = Registry(
    "importer", {_name(m): f"evalkit.importers.{m}:IMPORTER" for m in MODULES}
)


def register(imp: Importer) -> Importer:
    IMPORTERS.add(imp.name, imp, imp.description, folder=imp.folder, options=imp.options)
    return imp


def load_all() -> None:
    IMPORTERS.names()  # listing a registry loads its built-ins


def _ordered() -> list[Importer]:
    load_all()
    by_name = {e.name: e.obj for e in IMPORTERS}
    order = [n for n in map(_name, MODULES) if n in by_name]
    return [by_name[n] for n in order] + [by_name[n] for n in by_name if n not in order]


def detect_format(path: str | os.PathLike) -> str | None:
    """The name of the importer whose ``detect`` accepts this file or folder, or None."""
    probe = Probe(path)
    for imp in _ordered():
        if imp.folder in (None, probe.path.is_dir()) and _safe_detect(imp, probe):
            return imp.name
    return None


def _safe_detect(imp: Importer, probe: Probe) -> bool:
    try:
        return bool(imp.detect(probe))
    except Exception:  # a detector must never stop an import; an odd file is just not this format
        return False


def _inputs(
    paths: Iterable[str | os.PathLike], fmt: str, report: ImportReport
) -> Iterator[tuple[Importer, Probe]]:
    """(importer, probe) for every input, walking folders in sorted order."""
    importers = _ordered()
    chosen = None if fmt == "auto" else IMPORTERS.get(fmt)

    def pick(probe: Probe) -> Importer | None:
        is_dir = probe.path.is_dir()
        if chosen is not None:
            if chosen.folder in (None, is_dir) and (not is_dir or _safe_detect(chosen, probe)):
                return chosen
            return None
        for imp in importers:
            if imp.folder in (None, is_dir) and _safe_detect(imp, probe):
                return imp
        return None

    seen: set[Path] = set()  # real paths: a symlink loop or a second link is read once

    def walk(p: Path, explicit: bool) -> Iterator[tuple[Importer, Probe]]:
        real = p.resolve()
        if real in seen:
            report.skip(p, 0, "a symlink to a path already read")
            return
        if p.exists():
            seen.add(real)
        probe = Probe(p)
        if p.is_dir():
            imp = pick(probe)
            if imp:
                yield imp, probe
                return
            for child in sorted(p.iterdir()):
                if child.name.startswith("."):
                    continue
                yield from walk(child, False)
            return
        if not p.is_file():
            report.problem(p, 0, "no such file or folder", key="missing input")
            return
        imp = pick(probe)
        if imp is None and explicit and chosen is not None:
            imp = chosen  # a file named on the command line is read as the format asked for
        if imp is None:
            report.skip(p, 0, f"{UNRECOGNISED}: {_why_not(probe, chosen)}", key=UNRECOGNISED)
            return
        yield imp, probe

    for p in paths:
        yield from walk(Path(p), True)


def _why_not(probe: Probe, chosen: Importer | None) -> str:
    """Why no importer took a file, in words a user can act on."""
    try:
        size = probe.path.stat().st_size
        head = probe.head
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if size == 0:
        return "empty file"
    if b"\0" in head[:4096]:
        return "binary file (not a session format evalkit reads)"
    if chosen is not None:
        return f"not a {chosen.name} file (its detector rejected the content)"
    kind = "JSON" if probe.looks_json() else "JSONL" if probe.jsonl else "text"
    return f"format not recognised ({kind} that no importer's detector accepts; see `evalkit importers`)"


def iter_sessions(
    paths: Iterable[str | os.PathLike],
    fmt: str = "auto",
    report: ImportReport | None = None,
    redact: bool = False,
    options: dict[str, Any] | None = None,
) -> Iterator[Session]:
    """Stream canonical sessions from files and folders; every problem lands in ``report``.

    An importer that fails on one input (a bug, or input too odd to parse) costs that input only:
    the failure is recorded as a problem naming the file and the import goes on.
    """
    from evalkit.common.redact import redact_session

    report = report if report is not None else ImportReport()
    options = options or {}
    seen: set[str] = set()
    people: dict[str, str] = {}  # one placeholder per person across the whole import
    for imp, probe in _inputs(paths, fmt, report):
        report.files += 1
        try:
            for s in imp.read(probe, report, options):
                if s.id in seen:
                    _rename(s, f"{s.id}~{hashlib.sha1(s.source.path.encode()).hexdigest()[:8]}")
                seen.add(s.id)
                if redact:
                    s = redact_session(s, report.redactions, people)
                report.count_session(s)
                yield s
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as e:
            report.problem(
                probe.path, 0, f"{imp.name} importer stopped: {type(e).__name__}: {e}", key="importer stopped"
            )


def _rename(s: Session, new_id: str) -> None:
    """Give a session whose id is already taken (same file name elsewhere) an id derived from its path."""
    for m in s.messages:
        if m.id.startswith(s.id + ":"):
            m.id = new_id + m.id[len(s.id) :]
    s.id = new_id


def import_paths(
    paths: Iterable[str | os.PathLike],
    fmt: str = "auto",
    redact: bool = False,
    options: dict[str, Any] | None = None,
) -> tuple[list[Session], ImportReport]:
    """Import everything into memory (small inputs, tests); use :func:`iter_sessions` to stream."""
    report = ImportReport()
    sessions = list(iter_sessions(paths, fmt, report, redact, options))
    return sessions, report


def import_to_corpus(
    paths: Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    fmt: str = "auto",
    redact: bool = False,
    options: dict[str, Any] | None = None,
) -> tuple[dict, ImportReport]:
    """Import into a canonical corpus folder (sessions.jsonl, facts.jsonl, manifest.json), streaming."""
    from evalkit.corpus import write_corpus

    report = ImportReport()
    paths = [str(p) for p in paths]
    manifest = write_corpus(
        iter_sessions(paths, fmt, report, redact, options),
        out_dir,
        source=" ".join(paths),
        kind="import",
        extra=lambda: {"import": report.to_dict(), "format": fmt, "redacted": redact},
    )
    return manifest, report


__all__ = [
    "IMPORTERS",
    "ImportReport",
    "Importer",
    "Issue",
    "Probe",
    "detect_format",
    "import_paths",
    "import_to_corpus",
    "iter_sessions",
    "register",
]
