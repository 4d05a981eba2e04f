"""Measure the fact extractor against hand labels: precision and recall per fact kind.

A label file (``tests/fixtures/labels/*.json``, rules in that folder's README) lists, per real
session, what a careful reader finds in the raw transcript: test tallies, failing tool calls,
user constraints, files modified and identifiers, each anchored to a message id. This module
imports each labelled session, extracts its facts and counts matches kind by kind:

- tallies: same message and the same passed/failed/errors/skipped counts (count-exact);
- failures: same message (a failing call's result); ``fixed`` agreement is reported apart;
- constraints: same message and the same rule in substance (word overlap, see :func:`same_rule`);
- files modified: the same path, where a relative path may match the tail of an absolute one;
- identifiers: same kind and value (an error string may be quoted in part).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.contracts.session import Session
from evalkit.facts.extract import Facts, compute_facts

KINDS = ("tallies", "failures", "constraints", "files_modified", "identifiers")


@dataclass
class Score:
    """Matches of one fact kind: predicted facts that match a label, labels that were found."""

    pred_hit: int = 0
    pred: int = 0
    label_hit: int = 0
    label: int = 0

    @property
    def precision(self) -> float | None:
        return self.pred_hit / self.pred if self.pred else None

    @property
    def recall(self) -> float | None:
        return self.label_hit / self.label if self.label else None

    def add(self, other: Score) -> None:
        self.pred_hit += other.pred_hit
        self.pred += other.pred
        self.label_hit += other.label_hit
        self.label += other.label


@dataclass
class SessionCheck:
    """One labelled session's scores and what did not match (for reading the misses)."""

    file: str
    session: str
    scores: dict[str, Score]
    misses: dict[str, list] = field(default_factory=dict)  # kind -> unmatched labels
    extras: dict[str, list] = field(default_factory=dict)  # kind -> unmatched predictions
    fixed_agree: int = 0
    fixed_pairs: int = 0


@dataclass
class CheckResult:
    """Every session of one label file, and the totals per kind."""

    labels: str
    sessions: list[SessionCheck]

    def totals(self) -> dict[str, Score]:
        out = {k: Score() for k in KINDS}
        for s in self.sessions:
            for k, sc in s.scores.items():
                out[k].add(sc)
        return out

    def fixed_agreement(self) -> tuple[int, int]:
        return sum(s.fixed_agree for s in self.sessions), sum(s.fixed_pairs for s in self.sessions)


# --------------------------------------------------------------------------- matching

_WORD = re.compile(r"[a-z0-9_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def same_rule(pred: str, label: str) -> bool:
    """A predicted constraint states the labelled rule: it holds at least 80% of the label's words
    and at least half of its own words are the label's (so a whole paragraph does not match)."""
    p, lab = set(_words(pred)), set(_words(label))
    if not p or not lab:
        return False
    common = len(p & lab)
    return common >= 0.8 * len(lab) and common >= 0.5 * len(p)


def same_path(pred: str, label: str) -> bool:
    """Equal paths, or one is the other's tail at a folder boundary (``/repo/a/b.py`` ~ ``a/b.py``)."""
    a, b = os.path.normpath(pred.strip()), os.path.normpath(label.strip())
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _fold(s: str) -> str:
    return " ".join(s.split()).strip().rstrip(".,;:").lower()


def same_identifier(pred: tuple[str, str], label: tuple[str, str]) -> bool:
    """Same kind and value; an error string matches when one holds the other (quoted in part)."""
    (pk, pv), (lk, lv) = pred, label
    if pk != lk:
        return False
    a, b = _fold(pv), _fold(lv)
    if pk == "error":
        return bool(a and b) and (b in a or (a in b and len(a) >= 0.5 * len(b)))
    return a == b


def _match(
    preds: list, labels: list, same: Callable[[object, object], bool]
) -> tuple[Score, list, list, list]:
    """Greedy one-to-one matching in order; returns the score, matched pairs, misses and extras."""
    free = list(range(len(preds)))
    pairs, misses = [], []
    for lab in labels:
        hit = next((i for i in free if same(preds[i], lab)), None)
        if hit is None:
            misses.append(lab)
        else:
            free.remove(hit)
            pairs.append((preds[hit], lab))
    extras = [preds[i] for i in free]
    n = len(pairs)
    return Score(n, len(preds), n, len(labels)), pairs, misses, extras


# --------------------------------------------------------------------------- one session


def _suffix(msg_id: str) -> str:
    return msg_id.rsplit(":", 1)[-1]


def check_session(session: Session, facts: Facts, label: dict) -> SessionCheck:
    """Score one session's extracted facts against its labels."""
    mid = [_suffix(m.id) for m in session.messages]
    out = SessionCheck(label["file"], session.id, {})

    def record(kind, preds, labels, same):
        score, pairs, misses, extras = _match(preds, labels, same)
        out.scores[kind] = score
        if misses:
            out.misses[kind] = misses
        if extras:
            out.extras[kind] = extras
        return pairs

    record(
        "tallies",
        [(mid[t.message_index], t.passed, t.failed, t.errors, t.skipped) for t in facts.tallies],
        [
            (t["msg"], t["passed"], t["failed"], t.get("errors", 0), t.get("skipped", 0))
            for t in label["tallies"]
        ],
        lambda a, b: a == b,
    )
    pairs = record(
        "failures",
        [(mid[f.message_index], f.fixed_at is not None, f.command) for f in facts.failures],
        [(f["msg"], bool(f["fixed"])) for f in label["failures"]],
        lambda a, b: a[0] == b[0],
    )
    out.fixed_pairs = len(pairs)
    out.fixed_agree = sum(p[1] == lab[1] for p, lab in pairs)
    record(
        "constraints",
        [(mid[c.message_index], c.text) for c in facts.constraints],
        [(c["msg"], c["rule"]) for c in label["constraints"]],
        lambda a, b: a[0] == b[0] and same_rule(a[1], b[1]),
    )
    record(
        "files_modified",
        list(dict.fromkeys(f.path for f in facts.files_modified)),
        list(label["files_modified"]),
        same_path,
    )
    record(
        "identifiers",
        list(dict.fromkeys((i.kind, i.value) for i in facts.identifiers)),
        [(i["kind"], i["value"]) for i in label["identifiers"]],
        same_identifier,
    )
    return out


# --------------------------------------------------------------------------- label files


def find_transcripts(start: str | os.PathLike | None = None) -> Path | None:
    """``shared/transcripts`` beside the checkout or a folder above it (worktrees sit deeper)."""
    here = Path(start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        cand = p / "shared" / "transcripts"
        if cand.is_dir():
            return cand
    return None


def read_labels(path: str | os.PathLike) -> list[dict]:
    """A label file: a JSON list of sessions, each with the five fact kinds (see the README)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of labelled sessions")
    for n, entry in enumerate(data):
        for key in ("file", *KINDS):
            if key not in entry:
                raise ValueError(f"{path}: entry {n} ({entry.get('file', '?')}): missing field {key!r}")
    return data


def check_labels(path: str | os.PathLike, transcripts: str | os.PathLike) -> CheckResult:
    """Import every labelled session from ``transcripts``, extract its facts and score them."""
    from evalkit.importers import import_paths

    root = Path(transcripts)
    checks = []
    for entry in read_labels(path):
        sessions, report = import_paths([root / entry["file"]])
        want = entry.get("session")
        match = [s for s in sessions if want is None or s.id == want]
        if not match:
            raise ValueError(
                f"{path}: {entry['file']}: no session {want or ''} imported ({report.summary()})"
            )
        s = match[0]
        checks.append(check_session(s, compute_facts(s), entry))
    return CheckResult(str(path), checks)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def format_table(results: Iterable[CheckResult]) -> str:
    """Markdown table: per label file and kind, matched/predicted, precision, matched/labelled, recall."""
    rows = [
        "| labels | sessions | fact | precision | (hit/pred) | recall | (hit/label) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        name = Path(r.labels).name
        for kind, sc in r.totals().items():
            rows.append(
                f"| {name} | {len(r.sessions)} | {kind} | {_fmt(sc.precision)} | {sc.pred_hit}/{sc.pred} "
                f"| {_fmt(sc.recall)} | {sc.label_hit}/{sc.label} |"
            )
        agree, pairs = r.fixed_agreement()
        rows.append(f"| {name} | {len(r.sessions)} | failures: fixed agrees | {agree}/{pairs} | | | |")
    return "\n".join(rows)
