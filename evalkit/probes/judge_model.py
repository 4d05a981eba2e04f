"""The model grader of the judge and bank probes: the answering model sees only the
post-compaction context and the question; the judge sees question, answer and expected facts
and scores 0–5 on six dimensions with a rationale. A failed call raises (an error row, never a
zero grade); an unparseable verdict is dropped from the cache so the next run asks again."""

from __future__ import annotations

import json
import re
from typing import Any

from evalkit.probes.base import ProbeInput

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


def _client(inp: ProbeInput):
    from evalkit.models import make_client

    extras = inp.view.extras
    if "client" not in extras:
        ctx = extras.get("ctx")
        extras["client"] = make_client(ctx.model if ctx else {}, (ctx.run_dir or None) if ctx else None)
    return extras["client"]


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


def answer_request(q: dict[str, Any], inp: ProbeInput, model: str, replicate: int = 0):
    """The answering model's request: only the post-compaction context and the question."""
    from evalkit.models import ChatRequest

    return ChatRequest(
        model=model,
        messages=(
            {"role": "system", "content": ANSWER_SYSTEM},
            {
                "role": "user",
                "content": f"<context>\n{inp.visible_text()}\n</context>\n\nQuestion: {q['text']}",
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


def model_grade(q: dict[str, Any], inp: ProbeInput, model: dict, replicates: int) -> dict[str, Any]:
    """Ask the answering model and the judge ``replicates`` times; mean grades per dimension."""
    client = _client(inp)
    name = model.get("model", "")
    grades: list[dict[str, Any]] = []
    for r in range(max(1, replicates)):
        answer = client(answer_request(q, inp, name, r))
        if not answer.ok:
            raise RuntimeError(f"answer call failed: {answer.error}")
        ask = judge_request(q, answer.text or "", name, r)
        verdict = client(ask)
        if not verdict.ok:
            raise RuntimeError(f"judge call failed: {verdict.error}")
        try:
            g = parse_grades(verdict.text or "")
        except ValueError:
            if hasattr(client, "forget"):
                client.forget(ask)  # an unparseable verdict is not replayed by the next run
            raise
        g["answer"] = answer.text
        grades.append(g)
    mean = {d: sum(g[d] for g in grades) / len(grades) for d in DIMENSIONS}
    mean["rationale"] = " | ".join(g["rationale"] for g in grades)
    mean["answers"] = [g["answer"] for g in grades]
    return mean


def use_model(inp: ProbeInput, backend: str) -> tuple[bool, dict]:
    """Whether the probe asks the run's model (not the offline stand-in, and not told ``offline``),
    and the model settings."""
    ctx = inp.view.extras.get("ctx")
    model = dict(ctx.model) if ctx else {}
    if backend == "offline":
        return False, model
    from evalkit.models import is_offline_standin

    try:
        return not is_offline_standin(model.get("backend", "extractive")), model
    except KeyError:
        return True, model  # an unregistered backend is a real one from a plugin
