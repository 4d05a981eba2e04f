"""Inspect AI eval logs: ``.json`` and ``.eval`` (a zip of ``header.json`` + ``samples/*.json``).

One session per sample and epoch, from ``sample.messages`` through the shared OpenAI mapping
(Inspect's ``tool_calls`` carry ``function`` names and ``arguments`` objects; a failed call has
``error{type, message}``). ``compaction`` events become :class:`Compaction` messages placed after
the assistant turn they followed (counted by ``model`` events). ``.eval`` samples are read one at
a time from the zip.
"""

from __future__ import annotations

import json
import zipfile

from evalkit.contracts.session import Compaction
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, as_int, short_id
from evalkit.importers.inputs import ImportReport, Probe, require_json
from evalkit.importers.openai_style import OpenAIMapper

ZIP_MAGIC = b"PK\x03\x04"


def detect(probe: Probe) -> bool:
    if probe.head.startswith(ZIP_MAGIC):
        try:
            with zipfile.ZipFile(probe.path) as z:
                names = set(z.namelist())
        except (zipfile.BadZipFile, OSError):
            return False
        return "header.json" in names or any(n.startswith("samples/") for n in names)
    h = probe.head[:4096]
    return h.lstrip()[:1] == b"{" and b'"eval"' in h and b'"version"' in h and b'"status"' in h


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    stem = short_id(path.name.rsplit(".", 1)[0])
    if probe.head.startswith(ZIP_MAGIC):
        try:
            z = zipfile.ZipFile(path)
        except zipfile.BadZipFile as e:
            report.problem(path, 0, f"not a readable zip: {e}", key="file skipped: bad zip")
            return
        with z:
            header = _zip_json(z, "header.json", report, path) if "header.json" in z.namelist() else {}
            for name in sorted(n for n in z.namelist() if n.startswith("samples/") and n.endswith(".json")):
                sample = _zip_json(z, name, report, path)
                if isinstance(sample, dict):
                    s = _sample(sample, header or {}, report, path, stem, name)
                    if s:
                        yield s
        return
    log = require_json(probe, report, dict)
    if log is None:
        return
    samples = log.get("samples") or []
    if not isinstance(samples, list):
        report.problem(path, 0, "samples is not a list; file skipped", key="file skipped")
        return
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict):
            report.problem(path, 0, f"samples[{i}]: not an object; skipped", key="not a JSON object")
            continue
        s = _sample(sample, log, report, path, stem, f"samples[{i}]")
        if s:
            yield s


def _zip_json(z: zipfile.ZipFile, name: str, report: ImportReport, path):
    try:
        return json.loads(z.read(name).decode("utf-8", errors="replace"))
    except (ValueError, zipfile.BadZipFile, OSError, EOFError) as e:
        report.problem(f"{path}!{name}", 0, f"unreadable member: {e}", key="malformed JSON file")
        return None


def _sample(sample: dict, log: dict, report: ImportReport, path, stem: str, where: str):
    ev = log.get("eval") if isinstance(log.get("eval"), dict) else {}
    sid = f"{stem}:{sample.get('id')}:e{sample.get('epoch', 1)}"
    meta = {k: ev[k] for k in ("task", "model") if isinstance(ev.get(k), str)}
    meta.update(sample_id=sample.get("id"), epoch=sample.get("epoch"))
    if sample.get("error"):
        meta["error"] = str(
            sample["error"].get("message") if isinstance(sample["error"], dict) else sample["error"]
        )
    b = SessionBuilder(report, "inspect", path, short_id(sid), meta=meta)
    mapper = OpenAIMapper(b)
    messages = sample.get("messages") or []
    if not isinstance(messages, list):
        report.problem(path, 0, f"{where}.messages is not a list; sample skipped", key="file skipped")
        return None
    # Compactions: after the k-th assistant turn, where k = model events seen before the event.
    after: dict[int, list[Compaction]] = {}
    model_calls = 0
    for e in sample.get("events") or []:
        if not isinstance(e, dict):
            continue
        if e.get("event") == "model":
            model_calls += 1
        elif e.get("event") == "compaction":
            after.setdefault(model_calls, []).append(
                Compaction(
                    str(e.get("summary") or ""),
                    as_int(e.get("tokens_before")),
                    as_int(e.get("tokens_after")),
                    str(e.get("type") or "auto"),
                )
            )
    assistants = 0
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "assistant":
            for c in after.pop(assistants, []):
                b.add("user", [c], i + 1, {"synthetic": True})
            assistants += 1
        mapper.add(m, i + 1, f"{where}.messages[{i}]")
    for k in sorted(after):
        for c in after[k]:
            b.add("user", [c], 0, {"synthetic": True})
    return b.finish()


IMPORTER = register(
    Importer(
        "inspect",
        "Inspect AI eval logs (.json and .eval zip): one session per sample and epoch",
        detect,
        read,
    )
)
