"""The model grader of the judge and bank probes: the answering model sees only the
post-compaction context and the question; the judge sees question, answer and expected facts
and scores 0–5 on six dimensions with a rationale. A failed call raises (an error row, never a
zero grade); an unparseable verdict is dropped from the cache so the next run asks again."""

from __future__ import annotations

import json
import re
from typing import Any

from evalkit.contracts.config import ModelConfig
from evalkit.score.base import ProbeInput, model_client

DIMENSIONS = (
    "accuracy",
    "context_awareness",
    "artifact_trail",
    "completeness",
    "continuity",
    "instruction_following",
)

ANSWER_SYSTEM = (
    "You are a coding agent resuming work. Answer the question using only the conversation context "
    "given. Be specific: exact errors, counts, file paths. If the context does not say, answer "
    "'not in context'."
)
JUDGE_SYSTEM = (
    "You grade an agent's answer about its own earlier work against the expected facts. Score each "
    "dimension from 0 (fails) to 5 (perfect): accuracy, context_awareness, artifact_trail, "
    "completeness, continuity, instruction_following. Reply with one JSON object: "
    '{"accuracy": n, "context_awareness": n, "artifact_trail": n, "completeness": n, '
    '"continuity": n, "instruction_following": n, "rationale": "one or two sentences"}.'
)


def parse_grades(text: str) -> dict[str, Any]:
    """The judge's JSON object (the first {...} in its reply), validated."""
    m = re.search(r"\{.*\}", text, re.S)
    if not m:
        raise ValueError("judge reply holds no JSON object")
    d = json.loads(m.group(0))
    out: dict[str, Any] = {}
    for dim in DIMENSIONS:
        v = d.get(dim)
        if not isinstance(v, int | float) or not 0 <= v <= 5:
            raise ValueError(f"judge reply: {dim} = {v!r} is not a score in 0..5")
        out[dim] = float(v)
    out["rationale"] = str(d.get("rationale", ""))
    return out


def answer_request(q: dict[str, Any], inp: ProbeInput, model: str, replicate: int = 0, found: str = ""):
    """The answering model's request: only the post-compaction context (with what the recovery
    arm's one search ``found``, :mod:`evalkit.score.recovery`) and the question."""
    from evalkit.models import ChatRequest

    return ChatRequest(
        model=model,
        messages=(
            {"role": "system", "content": ANSWER_SYSTEM},
            {
                "role": "user",
                "content": f"<context>\n{inp.visible_text()}{found}\n</context>\n\nQuestion: {q['text']}",
            },
        ),
        max_tokens=400,
        replicate=replicate,
        purpose="answer",
    )


def judge_request(q: dict[str, Any], answer: str, model: str, replicate: int = 0):
    """The judge's request: question, expected facts and the answer to grade."""
    from evalkit.models import ChatRequest

    payload = {"question": q["text"], "expected_facts": q["expected"], "answer": answer}
    return ChatRequest(
        model=model,
        messages=(
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
        ),
        max_tokens=300,
        replicate=replicate,
        purpose="judge",
    )


def model_grades(
    qs: list[dict[str, Any]], inp: ProbeInput, model: ModelConfig, replicates: int
) -> list[dict[str, Any] | Exception]:
    """Ask the answering model and the judge ``replicates`` times per question: per question, the
    mean grades per dimension, or why it could not be graded (a failed call, an unparseable
    verdict).

    All the event's answers go out at once (``client.map``, up to ``[model] concurrency`` in
    flight), then all the judge calls: at a real endpoint's seconds of latency, two rounds of
    calls instead of two calls per question and replicate, one after another."""
    from evalkit.score.recovery import recovered

    client = model_client(inp)
    name = model.model
    reps = range(max(1, replicates))
    failed: dict[int, Exception] = {}
    found: dict[int, tuple[str, int]] = {}
    for i, q in enumerate(qs):  # the recovery arm: the model chooses one search query first
        try:
            found[i] = recovered(inp, q, model)
        except Exception as e:  # a failed query call is an error row for its question
            failed[i] = e
    pairs = [(i, r) for i in range(len(qs)) for r in reps if i not in failed]
    answers = client.map(
        [answer_request(qs[i], inp, name, r, found[i][0]) for i, r in pairs], return_exceptions=True
    )
    for (i, _), a in zip(pairs, answers, strict=True):
        if isinstance(a, Exception):
            failed.setdefault(i, a)
        elif not a.ok:
            failed.setdefault(i, RuntimeError(f"answer call failed: {a.error}"))
    asked = [(i, r, a) for (i, r), a in zip(pairs, answers, strict=True) if i not in failed]
    asks = [judge_request(qs[i], a.text or "", name, r) for i, r, a in asked]
    verdicts = client.map(asks, return_exceptions=True)
    grades: dict[int, list[dict[str, Any]]] = {}
    for (i, _, answer), verdict in zip(asked, verdicts, strict=True):
        if isinstance(verdict, Exception):
            failed.setdefault(i, verdict)
            continue
        if not verdict.ok:
            failed.setdefault(i, RuntimeError(f"judge call failed: {verdict.error}"))
            continue
        try:
            g = parse_grades(verdict.text or "")
        except ValueError as e:
            # The reply stays cached: it is what the endpoint answered, so an unchanged rerun
            # reads it again and records the same error instead of paying for the call twice.
            # (`evalkit cache prune` drops it when asking again is wanted.)
            failed.setdefault(i, e)
            continue
        g["answer"] = answer.text
        g["search_tokens"] = found[i][1]
        grades.setdefault(i, []).append(g)
    return [failed.get(i) or _mean_grades(grades[i]) for i in range(len(qs))]


def _mean_grades(grades: list[dict[str, Any]]) -> dict[str, Any]:
    mean: dict[str, Any] = {d: sum(g[d] for g in grades) / len(grades) for d in DIMENSIONS}
    mean["rationale"] = " | ".join(g["rationale"] for g in grades)
    mean["answers"] = [g["answer"] for g in grades]
    mean["search_tokens"] = grades[0]["search_tokens"]
    return mean


def use_model(inp: ProbeInput, backend: str) -> tuple[bool, ModelConfig]:
    """Whether the probe asks the run's model (not the offline stand-in, and not told ``offline``),
    and the model settings."""
    ctx = inp.view.extras.get("ctx")
    model = ctx.model if ctx else ModelConfig()
    if backend == "offline":
        return False, model
    from evalkit.models import is_offline_standin

    try:
        return not is_offline_standin(model.backend), model
    except KeyError:
        return True, model  # an unregistered backend is a real one from a plugin
