"""The fake server's files and batches endpoints (OpenAI's Batch API), for offline tests.

``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}/content``,
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``. A batch is
``in_progress`` for ``delay_s`` after it is created, then it is processed once, line by line, by
the server's own answer rule; each answered line is logged like a paid call (``"via": "batch"``).
Faults: ``fail`` is the share of lines that come back in the error file (drawn per line from
(seed, custom_id, attempt), so a resubmitted line may pass); batches whose creation ordinal
(1-based) is in ``expire`` expire after answering only the first half of their lines; a
cancelled batch answers none.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BatchFaults:
    delay_s: float = 0.2
    fail: float = 0.0
    expire: tuple[int, ...] = ()
    seed: int = 0


@dataclass
class BatchDesk:
    """Files and batches held in memory by one fake server."""

    server: Any  # FakeServer: answer(), attempt_of(), record()
    faults: BatchFaults = field(default_factory=BatchFaults)
    files: dict[str, dict] = field(default_factory=dict)
    batches: dict[str, dict] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)  # _finish stores files under it

    # -- files ----------------------------------------------------------------------------------
    def upload(self, content_type: str, raw: bytes) -> tuple[int, dict]:
        msg = email.parser.BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        fields = {p.get_param("name", header="content-disposition"): p for p in msg.get_payload()}
        if "file" not in fields:
            return 400, _error("multipart body without a 'file' part")
        data = fields["file"].get_payload(decode=True) or b""
        purpose = (fields["purpose"].get_payload(decode=True) or b"").decode() if "purpose" in fields else ""
        return 200, self._store(data, fields["file"].get_filename() or "upload.jsonl", purpose)

    def _store(self, data: bytes, name: str, purpose: str) -> dict:
        with self._lock:
            fid = f"file-fake{len(self.files) + 1:04d}"
            obj = {
                "id": fid,
                "object": "file",
                "bytes": len(data),
                "created_at": int(time.time()),
                "filename": name,
                "purpose": purpose,
                "status": "processed",
            }
            self.files[fid] = {"meta": obj, "data": data}
        return obj

    def content(self, fid: str) -> bytes | None:
        f = self.files.get(fid)
        return None if f is None else f["data"]

    # -- batches --------------------------------------------------------------------------------
    def create(self, body: dict) -> tuple[int, dict]:
        fid = body.get("input_file_id")
        if fid not in self.files:
            return 400, _error(f"no such file {fid!r}")
        with self._lock:
            n = len(self.batches) + 1
            bid = f"batch_fake{n:04d}"
            now = int(time.time())
            self.batches[bid] = {
                "ordinal": n,
                "ready_at": time.time() + self.faults.delay_s,
                "obj": {
                    "id": bid,
                    "object": "batch",
                    "endpoint": body.get("endpoint", "/v1/chat/completions"),
                    "input_file_id": fid,
                    "completion_window": body.get("completion_window", "24h"),
                    "status": "in_progress",
                    "created_at": now,
                    "in_progress_at": now,
                    "expires_at": now + 86400,
                    "metadata": body.get("metadata"),
                    "request_counts": {"total": 0, "completed": 0, "failed": 0},
                },
            }
        self.server.record(
            {"ts": time.time(), "method": "POST", "path": "/v1/batches", "batch": bid, "status": 200}
        )
        return 200, self.batches[bid]["obj"]

    def get(self, bid: str) -> tuple[int, dict]:
        b = self.batches.get(bid)
        if b is None:
            return 404, _error(f"no such batch {bid!r}")
        with self._lock:
            obj = b["obj"]
            if obj["status"] == "cancelling":
                self._finish(b, "cancelled", answer=0)
            elif obj["status"] == "in_progress" and time.time() >= b["ready_at"]:
                lines = self._lines(obj["input_file_id"])
                expire = b["ordinal"] in self.faults.expire
                self._finish(
                    b, "expired" if expire else "completed", len(lines) // 2 if expire else len(lines)
                )
        return 200, obj

    def cancel(self, bid: str) -> tuple[int, dict]:
        b = self.batches.get(bid)
        if b is None:
            return 404, _error(f"no such batch {bid!r}")
        with self._lock:
            if b["obj"]["status"] == "in_progress":
                b["obj"]["status"] = "cancelling"
        return 200, b["obj"]

    def _lines(self, fid: str) -> list[dict]:
        return [json.loads(x) for x in self.files[fid]["data"].decode().splitlines() if x.strip()]

    def _fails(self, custom_id: str, attempt: int) -> bool:
        h = hashlib.sha256(f"batch:{self.faults.seed}:{custom_id}:{attempt}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64 < self.faults.fail

    def _finish(self, b: dict, status: str, answer: int) -> None:
        """Process the batch once: the first ``answer`` lines are answered (or fail), the rest
        come back as errors with the batch's status as their code."""
        obj = b["obj"]
        out, err = [], []
        lines = self._lines(obj["input_file_id"])
        for i, line in enumerate(lines):
            cid = line.get("custom_id", "")
            rid = f"req_{obj['id']}_{i}"
            if i >= answer:
                err.append(
                    {
                        "id": rid,
                        "custom_id": cid,
                        "response": None,
                        "error": {"code": f"batch_{status}", "message": f"batch {status}"},
                    }
                )
                continue
            attempt = self.server.attempt_of(cid)
            entry = {
                "ts": time.time(),
                "method": "POST",
                "path": f"/v1/batches/{obj['id']}",
                "via": "batch",
                "key": cid,
                "attempt": attempt,
                "purpose": None,
                "model": line.get("body", {}).get("model"),
            }
            if self._fails(cid, attempt):
                entry.update(status=500, fault="500")
                err.append(
                    {
                        "id": rid,
                        "custom_id": cid,
                        "response": {
                            "status_code": 500,
                            "request_id": rid,
                            "body": _error("internal error (fake)"),
                        },
                        "error": None,
                    }
                )
            else:
                entry.update(status=200, fault=None)
                body = self.server.answer(line.get("body") or {})
                out.append(
                    {
                        "id": rid,
                        "custom_id": cid,
                        "response": {"status_code": 200, "request_id": rid, "body": body},
                        "error": None,
                    }
                )
            self.server.record(entry)
        now = int(time.time())
        obj["status"] = status
        obj[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[status]] = now
        obj["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        if out:
            obj["output_file_id"] = self._store(_jsonl(out), f"{obj['id']}_output.jsonl", "batch_output")[
                "id"
            ]
        if err:
            obj["error_file_id"] = self._store(_jsonl(err), f"{obj['id']}_error.jsonl", "batch_output")["id"]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def batch_route(desk: BatchDesk, method: str, path: str, headers, raw: bytes) -> tuple[int, Any] | None:
    """The answer to a files or batches request as (status, JSON or bytes); None: not such a request."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["v1"]:
        parts = parts[1:]
    if not parts or parts[0] not in ("files", "batches"):
        return None
    if parts == ["files"] and method == "POST":
        return desk.upload(headers.get("Content-Type", ""), raw)
    if parts[0] == "files" and len(parts) == 3 and parts[2] == "content" and method == "GET":
        data = desk.content(parts[1])
        return (200, data) if data is not None else (404, _error(f"no such file {parts[1]!r}"))
    if parts == ["batches"] and method == "POST":
        try:
            return desk.create(json.loads(raw or b"{}"))
        except json.JSONDecodeError:
            return 400, _error("request body is not JSON")
    if parts[0] == "batches" and len(parts) == 2 and method == "GET":
        return desk.get(parts[1])
    if parts[0] == "batches" and len(parts) == 3 and parts[2] == "cancel" and method == "POST":
        return desk.cancel(parts[1])
    return 404, _error(f"no route {method} {path}")
