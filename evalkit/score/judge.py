"""Judge probes: questions answerable only from what left the view (REFERENCES.md §2, Factory.ai).

Per session, questions are built once from the facts and pinned in ``corpus/questions.jsonl``, so
every arm is asked the same ones. Each pinned question has a kind (recall, artifact,
continuation, decision), expected facts, the message its answer comes from (``source``) and the
message from which the answer is stale (``until``). At a compaction event a question is asked
when its answer is current (``source <= at_message < until``) and its source message is no
longer in the model-visible context, so only the summary or a carried text can answer it.

Two graders, never mixed in one metric name:

- offline (default with the offline stand-in backend): the offline judge
  (:mod:`evalkit.models.offline_judge`) answers from the context by the question's words alone
  (BM25 retrieval of passages within a reading budget, ``max_chars``) and grades 5 × the share
  of expected facts its answer states. It shares no code with the
  facts or these probes; it measures whether the facts are still retrievable, not what a model
  would answer, and its metrics are named ``judge_offline_*``.
- model (a real backend): the answering model sees only the post-compaction context and the
  question (``purpose="answer"``); the judge sees question, answer and expected facts
  (``purpose="judge"``) and scores 0–5 on six dimensions with a rationale; overall = their
  mean. Metrics ``judge_<dimension>``, ``judge_overall``, ``judge_<kind>``, and per question
  ``judge_q:<id>`` (its overall grade, or an error row when a call for it failed: the means are
  over the graded questions); rationales go to ``judgements.jsonl`` in the run folder.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.contracts.session import Session
from evalkit.facts import Facts
from evalkit.models import offline_judge
from evalkit.score import tallymatch
from evalkit.score.base import ProbeInput, ProbeValue, probe
from evalkit.score.judge_context import SessionContext, session_cache
from evalkit.score.judge_model import DIMENSIONS, model_grades, use_model
from evalkit.score.recovery import is_recovery, recovered

KINDS = ("recall", "artifact", "continuation", "decision")
_ERR_CUES = r"error|exception|traceback|failed|fatal|not found|denied"
_TALLY_CUES = r"\d+ (?:passed|failed|passing|failing|skipped|errors?)|ran \d+ tests?|tests? run|total"
_PATH_CUES = r"[\w./-]+\.[A-Za-z]{1,5}\b"
_STOP = {"about", "their", "there", "these", "those", "which", "would", "should", "before", "after", "every"}


def _words(text: str, n: int) -> list[str]:
    """The ``n`` longest distinct words of ``text`` (topic cues), longest first."""
    ws = [w for w in re.findall(r"[\w./-]{5,}", text) if w.lower() not in _STOP]
    return sorted(dict.fromkeys(ws), key=lambda w: (-len(w), w))[:n]


def build_questions(session: Session, facts: Facts) -> list[dict[str, Any]]:
    """The session's pinned questions, deterministic in its facts and messages."""
    qs: list[dict[str, Any]] = []
    n_msgs = len(session.messages)

    def add(kind, text, expected, source, until, cues, tally=None):
        qs.append(
            {
                "id": f"{kind[:3]}{len(qs):04d}",
                "kind": kind,
                "text": text,
                "expected": expected,
                "tally": tally,
                "source": source,
                "until": until,
                "cues": cues,
            }
        )

    # recall: the error of each failure, current until it is fixed or fails again.
    for k, f in enumerate(facts.failures):
        later = [g.message_index for g in facts.failures[k + 1 :] if g.normalized == f.normalized]
        ends = [x for x in (f.fixed_at, *later[:1]) if x is not None]
        add(
            "recall",
            f"What error did the command `{f.command}` fail with?",
            [f.error_line or f.command],
            f.message_index,
            min(ends) if ends else None,
            [re.escape(f.command), _ERR_CUES],
        )
    # recall: each test tally, current until the next one.
    for k, t in enumerate(facts.tallies):
        until = facts.tallies[k + 1].message_index if k + 1 < len(facts.tallies) else None
        add(
            "recall",
            f"What was the result of the most recent test run (`{t.command or t.runner}`)? Give the exact counts.",
            [tallymatch.describe(t)],
            t.message_index,
            until,
            [_TALLY_CUES],
            tally={"passed": t.passed, "failed": t.failed, "errors": t.errors, "skipped": t.skipped},
        )
    # artifact: the set of modified files, each time a new one joins it.
    seen: list[str] = []
    firsts = []
    for f in facts.files_modified:
        if f.path not in seen:
            seen.append(f.path)
            firsts.append((f.message_index, list(seen)))
    for k, (idx, paths) in enumerate(firsts):
        until = firsts[k + 1][0] if k + 1 < len(firsts) else None
        add("artifact", "Which files have been modified so far?", paths[-20:], idx, until, [_PATH_CUES])
    # continuation: the user's latest request, current until the next one.
    users = [i for i, m in enumerate(session.messages) if m.is_genuine_user()]
    for k, i in enumerate(users):
        first = next((ln.strip() for ln in session.messages[i].text.splitlines() if ln.strip()), "")
        if not first:
            continue
        until = users[k + 1] if k + 1 < len(users) else None
        cue = "|".join(re.escape(w) for w in _words(first, 2)) or r"next"
        add(
            "continuation",
            "What did the user most recently ask for, i.e. what should be done next?",
            [first[:200]],
            i,
            until,
            [cue, r"next step"],
        )
    # decision: each constraint the user set, asked by its topic; never stale.
    for c in facts.constraints:
        topic = (_words(c.text, 1) or [c.keyword])[0]
        add(
            "decision",
            f"What was decided about `{topic}`?",
            [c.text],
            c.message_index,
            None,
            [re.escape(topic)],
        )
    assert all(q["source"] < n_msgs for q in qs)
    return qs


def session_questions(inp: ProbeInput) -> list[dict[str, Any]]:
    """The pinned questions (built and handed back for pinning when the corpus has none yet)."""
    extras = inp.view.extras
    if extras.get("questions") is None:
        extras["questions"] = build_questions(inp.session, inp.facts)
        extras["new_questions"] = {"session": inp.session.id, "questions": extras["questions"]}
    return extras["questions"]


def select_questions(inp: ProbeInput, per_kind: int = 1) -> list[dict[str, Any]]:
    """Questions to ask at this event: current, and answerable only from what left the view."""
    from evalkit.score.identifiers import in_view_ids

    # Masked copies do not count as kept: what masking elided has left the view (issue #15).
    at, msgs, kept = inp.event.at_message, inp.session.messages, in_view_ids(inp)
    full = bool(inp.event.meta.get("uncompacted"))  # the ceiling arm is asked against the full history
    out = []
    for kind in KINDS:
        cand = [
            q
            for q in session_questions(inp)
            if q["kind"] == kind
            and q["source"] <= at
            and (q["until"] is None or at < q["until"])
            and (full or msgs[q["source"]].id not in kept)
        ]
        cand.sort(key=lambda q: (q["source"], q["id"]))
        out.extend(cand[-per_kind:] if per_kind > 0 else cand)
    return out


class _VisibleContext(SessionContext):
    """The post-compaction context: each message after its speaker ("user: ..."), as a transcript
    shows it; its length is the message's own (without the speaker)."""

    def __init__(self, inp: ProbeInput):
        self.entries = inp.context_entries()
        self.texts = inp.message_texts()
        super().__init__(
            tuple(
                [m.id if rec else (m.role, t) for (m, rec), t in zip(self.entries, self.texts, strict=True)]
            ),
            self.texts,
            session_cache(inp),
        )

    def text(self, i: int) -> str:
        return f"{self.entries[i][0].role}: {self.texts[i]}"


def offline_grade(q: dict[str, Any], inp: ProbeInput, max_chars: int) -> list[bool]:
    """The offline judge's verdict per expected fact (:mod:`evalkit.models.offline_judge`): it
    answers from the context by the question's words alone."""
    ctx = inp.memo("oj-context", lambda: _VisibleContext(inp))
    # The same context is asked the same question again (arms that keep the same messages, the
    # A/A arm): 31% of the answers on 12 default sessions.
    key = ("answer", ctx.keys, q["text"], max_chars)
    text = ctx.cache.get(key)
    if text is None:
        text = ctx.cache[key] = offline_judge.answer(q["text"], ctx, max_chars)
    found, _ = recovered(inp, q)  # the recovery arm's one search over the removed region
    return offline_judge.grade(q["expected"], text + found, q.get("tally"))


_OFFLINE_METRICS = {
    "judge_offline_overall": "higher",
    **{f"judge_offline_{k}": "higher" for k in KINDS},
    "judge_search_tokens": "lower",
}
_MODEL_METRICS = {
    "judge_overall": "higher",
    **{f"judge_{d}": "higher" for d in DIMENSIONS},
    **{f"judge_{k}": "higher" for k in KINDS},
}


@probe(
    "judge",
    "questions only what left the view can answer (recall, artifact, continuation, decision), graded 0-5",
    metrics={**_OFFLINE_METRICS, **_MODEL_METRICS},
    catches="summaries that drop the error, the files touched, the next step or a decision (Factory.ai probes)",
    questions=True,
    uses_model=True,
)
def judge(
    inp: ProbeInput,
    per_kind: int = 1,
    max_chars: int = offline_judge.MAX_CHARS,
    backend: str = "configured",
    replicates: int = 1,
) -> list[ProbeValue]:
    """Per event, up to ``per_kind`` pinned questions of each kind whose answer left the view.

    ``backend = "configured"`` uses the run's model for answer and judge unless it is the offline
    stand-in, in which case (and with ``backend = "offline"``) the offline grader scores instead;
    its metrics are ``judge_offline_*`` so the two are never averaged together. Per-kind metrics
    are the mean over that kind's questions; ``*_overall`` the mean over all asked questions.
    """
    qs = select_questions(inp, per_kind)
    if not qs:
        return []
    asks_model, model = use_model(inp, backend)
    by_kind: dict[str, list[float]] = {}
    if not asks_model:
        per_q = []  # each question's own grade: the scorecard's paired win/loss/tie (issue #15)
        for q in qs:
            hits = offline_grade(q, inp, max_chars)
            by_kind.setdefault(q["kind"], []).append(5 * sum(hits) / len(hits))
            per_q.append(ProbeValue(f"judge_offline_q:{q['id']}", 5 * sum(hits) / len(hits)))
        scores = [s for v in by_kind.values() for s in v]
        out = [ProbeValue("judge_offline_overall", sum(scores) / len(scores)), *per_q]
        if is_recovery(inp):  # the search's tokens, charged per asked question
            spent = [recovered(inp, q)[1] for q in qs]
            out.append(ProbeValue("judge_search_tokens", sum(spent) / len(spent)))
        return out + [ProbeValue(f"judge_offline_{k}", sum(v) / len(v)) for k, v in by_kind.items()]
    dims: dict[str, list[float]] = {d: [] for d in DIMENSIONS}
    log = inp.view.extras.setdefault("judgements", [])
    overall: list[float] = []
    errors: list[str] = []
    per_q = []  # each question's own grade, or why it has none (the scorecard's paired counts)
    for q, g in zip(qs, model_grades(qs, inp, model, replicates), strict=True):
        if isinstance(g, Exception):  # a failed call is an error row, never a zero grade
            errors.append(f"{q['id']}: {type(g).__name__}: {g}")
            per_q.append(ProbeValue(f"judge_q:{q['id']}", None, f"{type(g).__name__}: {g}"))
            continue
        ov = sum(g[d] for d in DIMENSIONS) / len(DIMENSIONS)
        per_q.append(ProbeValue(f"judge_q:{q['id']}", ov))
        overall.append(ov)
        by_kind.setdefault(q["kind"], []).append(ov)
        for d in DIMENSIONS:
            dims[d].append(g[d])
        ev = inp.event
        log.append(
            {
                "arm": ev.arm,
                "session": ev.session,
                "event": ev.event,
                "replicate": ev.replicate,
                "question": q["id"],
                "kind": q["kind"],
                **g,
                "overall": ov,
            }
        )
    if not overall:
        return [ProbeValue("judge_overall", None, "; ".join(errors)), *per_q]
    out = [ProbeValue("judge_overall", sum(overall) / len(overall), None), *per_q]
    if is_recovery(inp):
        spent = [g["search_tokens"] for g in log[-len(overall) :]]
        out.append(ProbeValue("judge_search_tokens", sum(spent) / len(spent)))
    out += [ProbeValue(f"judge_{d}", sum(v) / len(v)) for d, v in dims.items()]
    return out + [ProbeValue(f"judge_{k}", sum(v) / len(v)) for k, v in by_kind.items()]
