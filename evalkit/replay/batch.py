"""Provider batch jobs for the summarizer (``[model] batch = true``): each compaction round of
the whole corpus goes out as one batch through the ``openai`` SDK's files and batches endpoints.

A session's rounds are sequential (round 2's prompt holds round 1's summary), so the replay
advances round by round: a walk of every (session, arm) (``evalkit.replay.frontier``) answers
what the call cache holds and stops each (session, arm) at its first unanswered request; those
requests, one per (session, arm) at most and deduplicated by cache key, are the next batch. Its
answers go into the call cache and the walk starts again, until nothing is missing. The replay
stage then runs as usual and finds every answer in the cache, so a run is at most as many
batches as compaction rounds (plus resubmissions of failed lines).

Every batch id is appended to ``batches.jsonl`` in the run folder as soon as it exists: a run
killed while a batch is in flight waits for and collects *that* batch when it is resumed, never
submitting its requests again. Lines that fail (error file, an expired or cancelled batch, an
answer that is empty or a refusal) go into the next batch, up to ``batch_max_rounds``
submissions each; what still has no answer is a straggler: sent directly by the replay stage when
``batch_fallback = true``, else the run stops incomplete, naming them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evalkit.common.progress import log
from evalkit.contracts.config import ModelConfig, ReplayConfig
from evalkit.contracts.session import session_from_dict
from evalkit.models.budget import BudgetExceeded, StopRun
from evalkit.models.client import ModelClient, build_client
from evalkit.models.completion import Retryable, parse_completion
from evalkit.models.openai_backend import OpenAIBackend
from evalkit.models.request import ChatRequest, ChatResponse
from evalkit.replay.frontier import Pending, walk

RECORD = "batches.jsonl"
TERMINAL = ("completed", "expired", "cancelled", "failed")


class BatchStragglers(StopRun):
    """Requests still unanswered after their last batch, with ``batch_fallback`` off."""

    reason = "batch"


POLL_MAX_S = 300.0  # the longest wait between polls


@dataclass(frozen=True)
class BatchSettings:
    poll_s: float  # first wait between polls; grows ×1.5 per poll up to poll_max_s
    poll_max_s: float
    max_rounds: int  # submissions of one request before it is a straggler
    fallback: bool  # send stragglers directly

    @classmethod
    def from_model(cls, model: ModelConfig) -> BatchSettings:
        """``[model]``'s batch keys (their defaults are the model's)."""
        return cls(
            model.batch_poll_s,
            max(model.batch_poll_s, POLL_MAX_S),
            model.batch_max_rounds,
            model.batch_fallback,
        )


class Frontier:
    """The walking client: the cached answer, or note the request and stop this (session, arm)."""

    def __init__(self, client: ModelClient):
        self.client = client
        self.misses: dict[str, ChatRequest] = {}

    def key(self, request: ChatRequest) -> str:
        return self.client.key(request)

    def __call__(self, request: ChatRequest) -> ChatResponse:
        key = self.key(request)
        hit = self.client.cache.get(key)
        if hit is not None:
            return hit
        self.misses.setdefault(key, request)
        raise Pending(key)


class BatchJobs:
    """Submit, poll and collect batches; the record of every batch is ``<run>/batches.jsonl``."""

    def __init__(self, client: ModelClient, run_dir: str | Path, settings: BatchSettings):
        import openai

        backend = client.backend
        if not isinstance(backend, OpenAIBackend):
            raise ValueError(f'[model] batch = true needs backend = "openai", not {backend.name!r}')
        if client.cache is None:
            raise ValueError(
                '[model] batch = true needs the call cache (cache = "use"): answers are collected into it'
            )
        self.client, self.backend, self.settings = client, backend, settings
        self.sdk = openai.OpenAI(
            api_key=backend._api_key, base_url=backend.base_url, max_retries=5, timeout=backend.timeout
        )
        self.path = Path(run_dir) / RECORD

    def records(self) -> list[dict]:
        if not self.path.is_file():
            return []
        return [json.loads(x) for x in self.path.read_text(encoding="utf-8").splitlines() if x.strip()]

    def _append(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**record, "at": time.time()}) + "\n")
            fh.flush()

    def outstanding(self) -> list[dict]:
        """Submitted batches not yet collected (a killed run's, on resume)."""
        recs = self.records()
        done = {r["batch"] for r in recs if r["event"] == "collected"}
        return [r for r in recs if r["event"] == "submitted" and r["batch"] not in done]

    def tries(self) -> Counter:
        """How many times each request key has been submitted (across resumed runs)."""
        return Counter(k for r in self.records() if r["event"] == "submitted" for k in r["keys"])

    def submit(self, requests: dict[str, ChatRequest], round_no: int) -> str:
        lines = []
        for key, req in requests.items():
            body = self.backend.body(req)
            lines.append(
                json.dumps({"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body})
            )
        data = ("\n".join(lines) + "\n").encode()
        f = self.sdk.files.create(file=(f"evalkit-round{round_no}.jsonl", data), purpose="batch")
        b = self.sdk.batches.create(
            input_file_id=f.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"evalkit_round": str(round_no)},
        )
        self._append(
            {"event": "submitted", "batch": b.id, "file": f.id, "round": round_no, "keys": list(requests)}
        )
        log(f"batch {b.id}: round {round_no}, {len(requests)} requests submitted")
        return b.id

    def wait(self, batch_id: str):
        delay = self.settings.poll_s
        while True:
            b = self.sdk.batches.retrieve(batch_id)
            if b.status in TERMINAL:
                return b
            time.sleep(delay)
            delay = min(self.settings.poll_max_s, delay * 1.5)

    def _lines(self, file_id: str | None) -> Iterator[dict]:
        if not file_id:
            return
        text = self.sdk.files.content(file_id).text
        for ln in text.splitlines():
            if ln.strip():
                yield json.loads(ln)

    def collect(
        self, batch_id: str, requests: dict[str, ChatRequest], reserved: dict[str, float] | None = None
    ) -> dict[str, str]:
        """Wait for a batch, put its answers into the call cache; returns the failed keys and why."""
        b = self.wait(batch_id)
        keys = next(
            (r["keys"] for r in self.records() if r.get("batch") == batch_id and r["event"] == "submitted"),
            list(requests),
        )
        failed: dict[str, str] = {}
        answered = 0
        budget, reserved = self.client.budget, reserved or {}
        for line in self._lines(b.output_file_id):
            key, resp = line.get("custom_id", ""), line.get("response") or {}
            req = requests.get(key)
            if req is None:
                continue  # no longer needed by the walk (cannot happen in a deterministic replay)
            if resp.get("status_code") != 200:
                failed[key] = f"HTTP {resp.get('status_code')}"
                continue
            try:
                answer = parse_completion(
                    resp.get("body") or {},
                    req,
                    self.backend.name,
                    self.backend.base_url,
                    self.backend.prices,
                    0.0,
                    batch=True,
                )
            except (Retryable, ValueError) as e:
                failed[key] = str(e)[:200]
                continue
            answer.key = key
            self.client.cache.put(key, req, answer, self.backend.base_url)
            if budget is not None and key in reserved:
                budget.settle(reserved[key], answer.cost_usd)
            answered += 1
        for line in self._lines(b.error_file_id):
            err = line.get("error") or (line.get("response") or {}).get("body", {}).get("error") or {}
            failed.setdefault(
                line.get("custom_id", ""), str(err.get("code") or err.get("message") or "error")
            )
        got = set(failed) | {k for k in keys if self.client.cache.get(k) is not None}
        for k in keys:
            if k not in got:
                failed[k] = f"batch {b.status}"
        self._append(
            {
                "event": "collected",
                "batch": batch_id,
                "status": b.status,
                "answered": answered,
                "failed": len(failed),
            }
        )
        log(f"batch {batch_id}: {b.status}, {answered} answered, {len(failed)} failed")
        return failed


def _sessions(corpus_dir: Path):
    with open(corpus_dir / "sessions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield session_from_dict(json.loads(line))


def batch_replay(
    corpus_dir: str | Path, run_dir: str | Path, replay: ReplayConfig, model: ModelConfig
) -> dict:
    """Answer every summarizer request of the replay through batches (see the module docstring).

    Returns counts: batches submitted and collected, rounds walked, stragglers left."""
    settings = BatchSettings.from_model(model)
    client = build_client(model, run_dir)
    jobs = BatchJobs(client, run_dir, settings)
    arms = list(replay.arms)
    tries = jobs.tries()
    submitted = walks = 0
    try:
        while True:
            frontier = Frontier(client)
            walk(_sessions(Path(corpus_dir)), arms, replay, model, frontier)
            walks += 1
            misses = frontier.misses
            if not misses:
                break
            outstanding = jobs.outstanding()
            if outstanding:  # a killed run's batches: collect them, never resubmit
                for rec in outstanding:
                    jobs.collect(rec["batch"], misses)
                continue
            todo = {k: r for k, r in misses.items() if tries[k] < settings.max_rounds}
            if not todo:
                break
            reserved, stop = {}, None
            try:
                for k, r in todo.items():
                    reserved[k] = client.budget.reserve(r) if client.budget else 0.0
            except BudgetExceeded as e:
                stop = e
            todo = {k: todo[k] for k in reserved}
            if todo:
                bid = jobs.submit(todo, walks)
                submitted += 1
                tries.update(list(todo))
                jobs.collect(bid, misses, reserved)
            if stop is not None:
                raise stop
    finally:
        client.close()
    stragglers = {k: r for k, r in frontier.misses.items()}
    if stragglers and not settings.fallback:
        raise BatchStragglers(
            f"{len(stragglers)} summarizer requests still unanswered after {settings.max_rounds} batch "
            f"submissions each (e.g. {next(iter(stragglers))[:12]}); set [model] batch_fallback = true "
            "to send them directly"
        )
    if stragglers:
        log(f"batch: {len(stragglers)} stragglers will be sent directly (batch_fallback = true)")
    return {"batches": submitted, "walks": walks, "stragglers": len(stragglers)}
