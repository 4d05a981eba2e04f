"""Probe banks: hand-written exam questions brought as data (docs/probe-banks.md).

A bank is a JSON file of questions about named sessions. Two shapes are read unchanged:

- evalkit's own (``"format": "evalkit.bank/1"``): ``{"questions": [{"id", "session", "kind",
  "question", "expected_facts", "from"?, "until"?}]}``, where ``from``/``until`` are message
  indices of the session: the question is asked at compaction events with ``from <= at < until``;
- hermes-agent's ``*.probes.json``: ``{"probes": [{"id", "type", "question", "expected_facts"}]}``
  (or a bare list of probes), about the session named by a top-level ``"session"`` key or, as
  hermes names them, by the file name before ``.probes.json``.

``[score] banks = ["probes/banks/*.json"]`` loads them for a run; the ``bank`` probe asks each
question at every compaction event of its session where it is current and grades it like the
judge does: the offline grader (share of expected facts retrievable from the context, metrics
``exam_offline*``) or the run's model as answerer and judge (``exam*``, 0–1 = overall / 5). Each
question's grade is also a row of its own (``exam_offline_q:<bank>/<id>``), so per-question
results reach the metrics table and the paired win/loss/tie count of the scorecard.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalkit.score.base import ProbeInput, ProbeValue, probe

FORMAT = "evalkit.bank/1"
KINDS = ("recall", "artifact", "continuation", "decision")
Q_PREFIX = "_q:"  # per-question metrics: exam_offline_q:<bank>/<id>


class BankError(ValueError):
    """A bank that cannot be used; the message names the file, the question and the field."""


@dataclass(frozen=True)
class BankQuestion:
    bank: str
    id: str
    session: str
    kind: str
    question: str
    expected_facts: tuple[str, ...]
    answerable_from: int | None = None
    until: int | None = None

    def as_judge_question(self) -> dict[str, Any]:
        """The judge's question shape (``evalkit.score.judge``), with no cues: the offline
        grader then reads the whole context."""
        return {
            "id": f"{self.bank}/{self.id}",
            "kind": self.kind,
            "text": self.question,
            "expected": list(self.expected_facts),
            "tally": None,
            "source": self.answerable_from,
            "until": self.until,
            "cues": [],
        }


def bank_name(path: str | os.PathLike) -> str:
    name = Path(path).name
    for suffix in (".probes.json", ".bank.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _str(where: str, d: dict, *keys: str, required: bool = True) -> str | None:
    for k in keys:
        v = d.get(k)
        if v is not None:
            if not isinstance(v, str) or not v.strip():
                raise BankError(f"{where}.{k}: expected a non-empty string, got {v!r}")
            return v
    if required:
        raise BankError(f"{where}: missing {' or '.join(keys)}")
    return None


def _index(where: str, d: dict, *keys: str) -> int | None:
    for k in keys:
        v = d.get(k)
        if v is not None:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise BankError(f"{where}.{k}: expected a message index (int >= 0), got {v!r}")
            return v
    return None


def parse_bank(raw: Any, source: str) -> list[BankQuestion]:
    """Validate a parsed bank (either shape) into questions; errors name ``source`` and the field."""
    name = bank_name(source)
    if isinstance(raw, list):
        items, default_session = raw, name
    elif isinstance(raw, dict):
        items = raw.get("questions", raw.get("probes"))
        default_session = raw.get("session") or raw.get("fixture") or name
        if not isinstance(items, list):
            raise BankError(f"{source}: expected a 'questions' or 'probes' list")
    else:
        raise BankError(f"{source}: expected a JSON object or list, got {type(raw).__name__}")
    out, seen = [], set()
    for k, q in enumerate(items):
        where = f"{source}: questions[{k}]"
        if not isinstance(q, dict):
            raise BankError(f"{where}: expected an object")
        qid = _str(where, q, "id", "name", required=False) or f"q{k:03d}"
        if qid in seen:
            raise BankError(f"{where}.id: duplicate id {qid!r}")
        seen.add(qid)
        kind = _str(where, q, "kind", "type", "category")
        if kind not in KINDS:
            raise BankError(f"{where}.kind: {kind!r} is not one of {', '.join(KINDS)}")
        facts = q.get("expected_facts")
        if (
            not isinstance(facts, list)
            or not facts
            or not all(isinstance(f, str) and f.strip() for f in facts)
        ):
            raise BankError(f"{where}.expected_facts: expected a non-empty list of strings")
        frm = _index(where, q, "from", "answerable_from")
        until = _index(where, q, "until")
        if frm is not None and until is not None and until <= frm:
            raise BankError(f"{where}.until: {until} is not after from = {frm}")
        out.append(
            BankQuestion(
                name,
                qid,
                _str(where, q, "session", required=False) or str(default_session),
                kind,
                _str(where, q, "question", "text", "prompt"),
                tuple(facts),
                frm,
                until,
            )
        )
    return out


def load_bank(path: str | os.PathLike) -> list[BankQuestion]:
    """Read and validate one bank file."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BankError(f"{p}: no such bank file") from None
    except json.JSONDecodeError as e:
        raise BankError(f"{p}:{e.lineno}: invalid JSON: {e.msg}") from None
    return parse_bank(raw, str(p))


def bank_files(patterns: list[str], root: Path | None = None) -> list[Path]:
    """The bank files the config's glob patterns name (relative to ``root``), sorted, each once.
    A pattern that matches nothing is an error: a typo must not silently drop an exam."""
    out: dict[str, Path] = {}
    for pat in patterns:
        full = pat if os.path.isabs(pat) or root is None else str(root / pat)
        hits = sorted(glob.glob(full))
        if not hits:
            raise BankError(f"[score] banks: {pat!r} matches no file (looked in {root or Path.cwd()})")
        for h in hits:
            out.setdefault(os.path.abspath(h), Path(h))
    return list(out.values())


def load_banks(patterns: list[str], root: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """Questions by session id, in the judge's shape, from every bank the patterns name."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for p in bank_files(patterns, root):
        for q in load_bank(p):
            by_session.setdefault(q.session, []).append(q.as_judge_question())
    return by_session


def to_evalkit(questions: list[BankQuestion]) -> dict[str, Any]:
    """A bank in evalkit's own format (what ``evalkit probes import`` writes)."""
    rows = []
    for q in questions:
        d = asdict(q)
        d.pop("bank")
        d["from"] = d.pop("answerable_from")
        d["expected_facts"] = list(q.expected_facts)
        rows.append({k: v for k, v in d.items() if v is not None})
    return {"format": FORMAT, "questions": rows}


BANKS_FILE = "banks.json"  # in the run's corpus/: the questions the run was scored with


def save_run_banks(run_dir: str | os.PathLike, by_session: dict[str, list[dict[str, Any]]]) -> Path:
    """Pin the loaded questions in the run folder, so a re-score asks the same ones."""
    p = Path(run_dir) / "corpus" / BANKS_FILE
    p.write_text(json.dumps(by_session, ensure_ascii=True, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    return p


def run_banks(run_dir: str | os.PathLike) -> dict[str, list[dict[str, Any]]]:
    """The questions pinned in a run folder (none: an empty dict)."""
    p = Path(run_dir) / "corpus" / BANKS_FILE
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


def current(q: dict[str, Any], at: int) -> bool:
    """Is the question answerable at compaction point ``at``?"""
    return (q["source"] is None or q["source"] <= at) and (q["until"] is None or at < q["until"])


def expected_found(q: dict[str, Any], text: str) -> list[bool]:
    """Which of the question's expected facts ``text`` states (tallies count-exact). The probe's
    own check of what is still in view; the offline judge (a stand-in) has its own grader."""
    from evalkit.facts import TallyFact
    from evalkit.score import tallymatch
    from evalkit.score.base import normalize

    if q.get("tally"):
        t = TallyFact(0, "", "", "", **q["tally"], offset=0, line="", output_chars=0)
        return [tallymatch.found_in(tallymatch.mentions(text), t)]
    norm = normalize(text)
    return [normalize(e) in norm for e in q["expected"]]


_OFFLINE = {"exam_offline": "higher", **{f"exam_offline_{k}": "higher" for k in KINDS}}
_MODEL = {"exam": "higher", **{f"exam_{k}": "higher" for k in KINDS}}


@probe(
    "bank",
    "hand-written probe-bank questions ([score] banks), graded per question at every compaction event",
    metrics={**_OFFLINE, **_MODEL},
    catches="whatever a person who read the session expects to survive (hermes-agent / Factory.ai probe banks)",
    uses_model=True,
)
def bank(inp: ProbeInput, backend: str = "configured", replicates: int = 1) -> list[ProbeValue]:
    """Per event, every bank question of this session that is current. The grade is a share in
    0..1; ``exam_offline`` / ``exam`` is the mean over the asked questions, ``*_<kind>`` per kind,
    and ``*_q:<bank>/<id>`` the question's own grade. A failed model call is an error row."""
    from evalkit.score.judge_model import DIMENSIONS, model_grades, use_model

    ctx = inp.view.extras.get("ctx")
    qs = [
        q
        for q in (getattr(ctx, "banks", None) or {}).get(inp.session.id, [])
        if current(q, inp.event.at_message)
    ]
    if not qs:
        return []
    asks_model, model = use_model(inp, backend)
    prefix = "exam" if asks_model else "exam_offline"
    grades: dict[str, float | None] = {}
    errors: dict[str, str] = {}
    if asks_model:
        for q, g in zip(qs, model_grades(qs, inp, model, replicates), strict=True):
            if isinstance(g, Exception):  # a failed call is an error row, never a zero grade
                errors[q["id"]] = f"{type(g).__name__}: {g}"
            else:
                grades[q["id"]] = sum(g[d] for d in DIMENSIONS) / len(DIMENSIONS) / 5
    else:
        for q in qs:
            hits = expected_found(q, inp.visible_text())
            grades[q["id"]] = sum(hits) / len(hits)
    out = [ProbeValue(f"{prefix}{Q_PREFIX}{qid}", None, err) for qid, err in errors.items()]
    out += [ProbeValue(f"{prefix}{Q_PREFIX}{qid}", v) for qid, v in grades.items()]
    if not grades:
        return [*out, ProbeValue(prefix, None, "; ".join(errors.values()))]
    kinds: dict[str, list[float]] = {}
    for q in qs:
        if q["id"] in grades:
            kinds.setdefault(q["kind"], []).append(grades[q["id"]])
    vals = list(grades.values())
    out.append(ProbeValue(prefix, sum(vals) / len(vals)))
    return out + [ProbeValue(f"{prefix}_{k}", sum(v) / len(v)) for k, v in kinds.items()]
