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

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.common.toolcalls import forward_slashes
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
    by_source: dict[tuple[str, str], Score] = field(default_factory=dict)  # (kind, source class)
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

    def source_totals(self) -> dict[tuple[str, str], Score]:
        """Scores per (kind, source class): predictions by the class the extractor gave them,
        labels by the class of the place they point at (:func:`label_source`)."""
        out: dict[tuple[str, str], Score] = {}
        for s in self.sessions:
            for key, sc in s.by_source.items():
                out.setdefault(key, Score()).add(sc)
        return dict(sorted(out.items()))

    def fixed_agreement(self) -> tuple[int, int]:
        return sum(s.fixed_agree for s in self.sessions), sum(s.fixed_pairs for s in self.sessions)


# --------------------------------------------------------------------------- matching

# Chinese, Japanese and Thai are written without spaces between words: each character is a word.
_WORD = re.compile(r"[a-z0-9_]+|[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


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
    """Equal paths, or one is the other's tail at a folder boundary (``/repo/a/b.py`` ~ ``a/b.py``);
    a Windows path's backslashes are its folder separators."""
    a, b = (os.path.normpath(forward_slashes(p.strip())) for p in (pred, label))
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
) -> tuple[Score, list, list, list, set[int], set[int]]:
    """Greedy one-to-one matching in order; returns the score, matched pairs, misses, extras and
    the indices of the matched predictions and labels."""
    free = list(range(len(preds)))
    pairs, misses, hit_labels = [], [], set()
    for j, lab in enumerate(labels):
        hit = next((i for i in free if same(preds[i], lab)), None)
        if hit is None:
            misses.append(lab)
        else:
            free.remove(hit)
            pairs.append((preds[hit], lab))
            hit_labels.add(j)
    extras = [preds[i] for i in free]
    n = len(pairs)
    hit_preds = set(range(len(preds))) - set(free)
    return Score(n, len(preds), n, len(labels)), pairs, misses, extras, hit_preds, hit_labels


# --------------------------------------------------------------------------- source classes


def label_source(session: Session, kind: str, label) -> str:
    """The source class of a labelled fact, from the place in the session it points at: the
    same classes the extractor gives its facts (``extract.SOURCES``), so precision and recall can
    be read per class. A label the classes do not cover is "other"."""
    from evalkit.facts.commands import _path_arg
    from evalkit.facts.constraints import is_template
    from evalkit.facts.failures import Polls, edit_lint_error, failure_source
    from evalkit.facts.identifiers import HARNESS_COMMIT, NEW_TEXT_KEYS
    from evalkit.facts.tallies import find_tally

    by_id = {_suffix(m.id): m for m in session.messages}
    if kind == "constraints":
        m = by_id.get(label[0])
        if m is None:
            return "other"
        if m.role == "tool" or m.meta.get("rejection"):
            return "rejection reason"
        return "task template" if is_template(m.text) else "user turn"
    if kind == "failures":
        m = by_id.get(label[0])
        res = m.tool_results()[0] if m is not None and m.tool_results() else None
        if res is None:
            return "other"
        calls = {c.id: c for x in session.messages for c in x.tool_calls()}
        polls = Polls()  # a poll's result reports on the command it polls
        for x in session.messages[: session.messages.index(m)]:
            for r in x.tool_results():
                polls.note(calls.get(r.call_id), r)
        call = calls.get(res.call_id)
        src = failure_source(polls.subject(call), res, find_tally(res.output))
        if src is None and edit_lint_error(call, res.output):
            return "lint"  # an applied edit whose lint reported errors in its file (Cline)
        if src is None and res.output.startswith("Applied edit to"):
            nxt = session.messages[session.messages.index(m) + 1 :][:4]
            if any(x.meta.get("harness") == "aider lint" for x in nxt):
                return "lint"  # aider linted the edit it had just applied and found errors
        return src or "other"
    if kind == "identifiers":
        k, value = label
        if k == "error":
            return "tool error"
        if k == "symbol":
            return "edit text"  # a name on a definition line of an edit's new text
        if k == "sha" and any(
            value in HARNESS_COMMIT.findall(r.output) for m in session.messages for r in m.tool_results()
        ):
            return "harness commit"
        for m in session.messages:
            if m.role in ("user", "assistant") and value in m.text:
                return "message"
            for c in m.tool_calls():
                writes = _path_arg(c.args) is not None
                for key, v in c.args.items():
                    if value in str(v):
                        content = (
                            writes and key in (*NEW_TEXT_KEYS, "edits", "diff")
                        ) or "Begin Patch" in str(v)
                        return "edit text" if content else "call arguments"
        return "other"
    return "tool result" if kind == "tallies" else "call"


def _record_sources(out, session, kind, preds, labels, pred_source, hit_preds, hit_labels) -> None:
    for i, p in enumerate(preds):
        sc = out.by_source.setdefault((kind, pred_source(p)), Score())
        sc.pred += 1
        sc.pred_hit += i in hit_preds
    for j, lab in enumerate(labels):
        sc = out.by_source.setdefault((kind, label_source(session, kind, lab)), Score())
        sc.label += 1
        sc.label_hit += j in hit_labels


# --------------------------------------------------------------------------- one session


def _suffix(msg_id: str) -> str:
    return msg_id.rsplit(":", 1)[-1]


def check_session(session: Session, facts: Facts, label: dict) -> SessionCheck:
    """Score one session's extracted facts against its labels."""
    mid = [_suffix(m.id) for m in session.messages]
    out = SessionCheck(label["file"], session.id, {})

    def record(kind, preds, labels, same, pred_source):
        score, pairs, misses, extras, hit_preds, hit_labels = _match(preds, labels, same)
        out.scores[kind] = score
        if misses:
            out.misses[kind] = misses
        if extras:
            out.extras[kind] = extras
        _record_sources(out, session, kind, preds, labels, pred_source, hit_preds, hit_labels)
        return pairs

    record(
        "tallies",
        [(mid[t.message_index], t.passed, t.failed, t.errors, t.skipped) for t in facts.tallies],
        [
            (t["msg"], t["passed"], t["failed"], t.get("errors", 0), t.get("skipped", 0))
            for t in label["tallies"]
        ],
        lambda a, b: a == b,
        lambda p: "tool result",
    )
    pairs = record(
        "failures",
        [(mid[f.message_index], f.fixed_at is not None, f.command, f.source) for f in facts.failures],
        [(f["msg"], bool(f["fixed"])) for f in label["failures"]],
        lambda a, b: a[0] == b[0],
        lambda p: p[3] or "other",
    )
    out.fixed_pairs = len(pairs)
    out.fixed_agree = sum(p[1] == lab[1] for p, lab in pairs)
    record(
        "constraints",
        [(mid[c.message_index], c.text, c.source) for c in facts.constraints],
        [(c["msg"], c["rule"]) for c in label["constraints"]],
        lambda a, b: a[0] == b[0] and same_rule(a[1], b[1]),
        lambda p: p[2],
    )
    record(
        "files_modified",
        list(dict.fromkeys(f.path for f in facts.files_modified)),
        list(label["files_modified"]),
        same_path,
        lambda p: "call",
    )
    ids = {}
    for i in facts.identifiers:
        ids.setdefault((i.kind, i.value), i.source)
    record(
        "identifiers",
        list(ids),
        [(i["kind"], i["value"]) for i in label["identifiers"]],
        same_identifier,
        lambda p: ids[p] or "other",
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
    """Import every labelled session from ``transcripts``, extract its facts and score them. An
    entry with a ``sha256`` is checked against the file first: labels of another version of a
    session would score the extractor on the wrong text."""
    from evalkit.importers import import_paths

    root = Path(transcripts)
    checks = []
    for entry in read_labels(path):
        want_sha = entry.get("sha256")
        if want_sha:
            got = hashlib.sha256((root / entry["file"]).read_bytes()).hexdigest()
            if got != want_sha:
                raise ValueError(f"{path}: {entry['file']}: sha256 {got} is not the labelled {want_sha}")
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


def format_source_table(results: Iterable[CheckResult]) -> str:
    """Markdown table: per label file, kind and source class, precision and recall."""
    rows = [
        "| labels | fact | source class | precision | (hit/pred) | recall | (hit/label) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        name = Path(r.labels).name
        for (kind, source), sc in r.source_totals().items():
            rows.append(
                f"| {name} | {kind} | {source} | {_fmt(sc.precision)} | {sc.pred_hit}/{sc.pred} "
                f"| {_fmt(sc.recall)} | {sc.label_hit}/{sc.label} |"
            )
    return "\n".join(rows)
