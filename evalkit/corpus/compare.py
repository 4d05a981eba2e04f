"""How close the synthetic corpus is to a real one: the distributions that matter, side by side.

``evalkit synth --compare CORPUS`` measures both corpora the same way and prints, per
distribution, the synthetic and real figures and a distance:

- continuous distributions (lengths, positions) use the two-sample **Kolmogorov–Smirnov**
  statistic D (``scipy.stats.ks_2samp``), on a log10 scale for lengths (the scale does not change
  D, but the figures printed are in decades); D is the largest gap between the two cumulative
  shares, so D ≤ 0.2 says no "at most x" event is 20 points more likely in one corpus;
- categorical ones (kinds, yes/no shares) use the **total-variation** distance
  ½ Σ |p − q|, the largest gap in probability over any set of categories: the same reading.

Both are bounded in [0, 1] and mean "the largest difference in probability of any event of the
kind measured", so one threshold (:data:`THRESHOLD` = 0.2) serves every row. A continuous row
whose real side is small is also accepted when D is below the two-sample KS critical value at
5% (1.358 · sqrt((n + m) / (n m))): a gap the real sample cannot tell from its own noise. Rows
where either side has fewer than :data:`MIN_N` observations are reported but not judged.

A ``CORPUS`` is a corpus folder (``sessions.jsonl``) or any folder the importers read (the
transcripts are imported in memory). Facts (tallies, constraints) come from :mod:`evalkit.facts`
on both sides, so the two are measured by the same definitions.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.contracts.session import Session

THRESHOLD = 0.2
MIN_N = 10
PASTE_LINES = 15  # a user turn with more lines (or a fenced block) carries pasted material
OVERSIZED = 50 * 1024  # seed 003: a paste that cannot share a 64 KiB summary source
GIANT_MESSAGE = 80_000  # chars: one message over keep-recent (20,000 tokens) can pin the kept tail (seed 004)
_REJECTED = re.compile(
    r"user (?:rejected|denied|doesn't want|declined)|tool use was rejected|permission denied by (?:the )?user",
    re.I,
)
_RESUMED = re.compile(
    r"\b(?:resum\w+|continu\w+ (?:from|where)|where we left off|previous (?:session|conversation))\b", re.I
)


@dataclass
class Measures:
    """Observations per distribution: lists of numbers (continuous) or Counters (categorical)."""

    continuous: dict[str, list[float]] = field(default_factory=dict)
    categorical: dict[str, Counter] = field(default_factory=dict)
    sessions: int = 0

    def add(self, name: str, value: float) -> None:
        self.continuous.setdefault(name, []).append(value)

    def count(self, name: str, category: str) -> None:
        self.categorical.setdefault(name, Counter())[category] += 1


def _call_kind(call, result) -> str:
    from evalkit.common.toolcalls import classify

    if result is not None and _REJECTED.search(result.output[:400]):
        return "rejected"
    name = call.name.lower()
    if "patch" in name:
        return "patch"
    kind = classify(call).kind
    return {"modify": "edit"}.get(kind, kind)


def measure(sessions: Iterable[Session]) -> Measures:
    """Every distribution of :data:`ROWS` over ``sessions``."""
    from evalkit.common.toolcalls import result_failed
    from evalkit.facts import compute_facts

    out = Measures()
    for s in sessions:
        out.sessions += 1
        facts = compute_facts(s)
        calls = {}
        users = 0
        for m in s.messages:
            size = len(m.text) + sum(len(r.output) for r in m.tool_results())
            size += sum(len(str(c.args)) for c in m.tool_calls())
            out.count("giant_message", "yes" if size > GIANT_MESSAGE else "no")
            for c in m.tool_calls():
                calls[c.id] = c
            for r in m.tool_results():
                n = len(r.output)
                out.add("tool_output_chars", math.log10(1 + n))
                call = calls.get(r.call_id)
                kind = _call_kind(call, r) if call is not None else "other"
                failed = result_failed(r) or kind == "rejected"
                out.count("call_fails", "failed" if failed else "ok")
                if failed:
                    out.count("failing_call_kind", kind)
            if m.is_genuine_user():
                users += 1
                text = m.text
                out.add("user_turn_chars", math.log10(1 + len(text)))
                pasted = text.count("\n") + 1 > PASTE_LINES or "```" in text
                out.count(
                    "user_turn_paste",
                    "oversized" if len(text) > OVERSIZED else "paste" if pasted else "typed",
                )
                for line in text.splitlines() if not pasted else ():
                    if line.strip() and len(line) <= 400:
                        out.add("user_line_words", math.log10(len(line.split())))
        first = next((m.text for m in s.messages if m.is_genuine_user()), "")
        resumed = bool(_RESUMED.search(first[:600])) or bool(s.meta.get("resumed"))
        out.count("resumed_session", "yes" if resumed else "no")
        for t in facts.tallies:
            out.add("test_output_chars", math.log10(1 + t.output_chars))
            out.add("tally_position", t.offset / t.output_chars if t.output_chars else 0.0)
            out.count("tally_runner", t.runner)
            if t.output_chars > 2_000:
                out.count("tally_past_2000", "yes" if t.offset > 2_000 else "no")
        for c in facts.constraints:
            out.add("constraint_words", math.log10(len(c.text.split())))
    return out


# name -> what it is (printed beside it)
ROWS = {
    "tool_output_chars": "tool output length, log10 chars",
    "test_output_chars": "test-run output length (outputs with a tally), log10 chars",
    "tally_position": "tally offset / output length",
    "tally_past_2000": "long test outputs (> 2,000 chars) with the tally past char 2,000",
    "tally_runner": "test runner of each tally",
    "call_fails": "tool calls that failed",
    "failing_call_kind": "failing calls by kind (shell, edit, patch, read, rejected, other)",
    "user_turn_chars": "user turn length, log10 chars",
    "user_turn_paste": "user turns: typed, pasted material, oversized paste (> 50 KiB)",
    "user_line_words": "words per line of typed user turns (no pasted material), log10",
    "constraint_words": "words per user constraint (facts), log10",
    "resumed_session": "sessions resumed from an earlier one",
    "giant_message": "messages over 80,000 chars (text, outputs and call arguments: seed 004)",
}


@dataclass(frozen=True)
class Row:
    name: str
    synthetic: str
    real: str
    distance: float | None
    n: tuple[int, int]
    judged: bool
    limit: float = THRESHOLD

    @property
    def ok(self) -> bool | None:
        return None if not self.judged or self.distance is None else self.distance <= self.limit


def ks_limit(n: int, m: int) -> float:
    """The accepted KS distance: the threshold, or the 5% two-sample critical value if larger."""
    return max(THRESHOLD, 1.358 * math.sqrt((n + m) / (n * m))) if n and m else THRESHOLD


def _quantiles(xs: list[float]) -> str:
    s = sorted(xs)
    q = [s[int(p * (len(s) - 1))] for p in (0.1, 0.5, 0.9)]
    return "p10/50/90 " + "/".join(f"{v:.2f}" for v in q)


def _shares(c: Counter) -> str:
    total = sum(c.values())
    top = c.most_common(5)
    return ", ".join(f"{k} {v / total:.3f}" for k, v in top) + (" …" if len(c) > 5 else "")


def total_variation(a: Counter, b: Counter) -> float:
    ta, tb = sum(a.values()), sum(b.values())
    return 0.5 * sum(abs(a[k] / ta - b[k] / tb) for k in set(a) | set(b))


def compare(synthetic: Measures, real: Measures) -> list[Row]:
    """One row per distribution in :data:`ROWS`."""
    from scipy.stats import ks_2samp

    rows = []
    for name in ROWS:
        if name in synthetic.continuous or name in real.continuous:
            a, b = synthetic.continuous.get(name, []), real.continuous.get(name, [])
            d = float(ks_2samp(a, b).statistic) if a and b else None
            rows.append(
                Row(
                    name,
                    _quantiles(a) if a else "-",
                    _quantiles(b) if b else "-",
                    d,
                    (len(a), len(b)),
                    min(len(a), len(b)) >= MIN_N,
                    ks_limit(len(a), len(b)),
                )
            )
        else:
            a, b = synthetic.categorical.get(name, Counter()), real.categorical.get(name, Counter())
            na, nb = sum(a.values()), sum(b.values())
            d = total_variation(a, b) if na and nb else None
            rows.append(
                Row(
                    name,
                    _shares(a) if na else "-",
                    _shares(b) if nb else "-",
                    d,
                    (na, nb),
                    min(na, nb) >= MIN_N,
                )
            )
    return rows


def load(path: str | os.PathLike) -> Iterator[Session]:
    """Sessions of a corpus folder or JSONL file, else of whatever the importers read there."""
    p = Path(path)
    if (p / "sessions.jsonl").exists() or p.suffix == ".jsonl":
        from evalkit.corpus.io import read_sessions

        yield from read_sessions(p, "skip")
        return
    from evalkit.importers import iter_sessions

    yield from iter_sessions([p])


def render_table(rows: list[Row], synthetic_n: int, real_n: int) -> str:
    """A Markdown table of the rows, with the threshold and verdicts."""
    out = [
        f"synthetic: {synthetic_n} sessions; real: {real_n} sessions; distance: KS D (continuous) or "
        f"total variation (categorical); threshold {THRESHOLD} (continuous: or the 5% two-sample KS "
        f"critical value when larger); rows with fewer than {MIN_N} observations on a side are not judged",
        "",
        "| distribution | synthetic | real | n (synth, real) | distance | limit | within |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        within = {True: "yes", False: "**no**", None: "not judged"}[r.ok]
        dist = "-" if r.distance is None else f"{r.distance:.3f}"
        out.append(
            f"| {r.name} ({ROWS[r.name]}) | {r.synthetic} | {r.real} | {r.n[0]}, {r.n[1]} | {dist} "
            f"| {r.limit:.3f} | {within} |"
        )
    return "\n".join(out)
