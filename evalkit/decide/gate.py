"""The CI gate: a run's verdicts against what the job requires, as JSON, Markdown and JUnit XML.

Everything is written before the caller exits, canonical JSON first, so a failed gate still leaves
its evidence. The printed verdicts and the exit code come from the same :class:`GateResult`.
An empty result set (no candidate judged) or a partial one (a required or configured arm without
rows, no baseline rows) fails whatever ``--fail-on`` says.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evalkit.common.files import AtomicWriter
from evalkit.contracts.exit_codes import EXIT_GATE_FAILED, EXIT_OK
from evalkit.decide.rules import VERDICTS

DEFAULT_FAIL_ON = ("drop", "untested")


@dataclass
class GateResult:
    """The gate's outcome; ``exit_code`` is derived from ``failures`` and nothing else."""

    run: str
    fail_on: list[str]
    require: dict[str, list[str]]
    failures: list[str] = field(default_factory=list)
    candidate_failures: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_GATE_FAILED


def parse_fail_on(text: str | None) -> list[str]:
    """``drop,inconclusive,untested`` (or ``none``) to a list; unknown words are a usage error."""
    if text is None:
        return list(DEFAULT_FAIL_ON)
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["none"]:
        return []
    bad = [w for w in words if w not in VERDICTS or w == "ship"]
    if bad:
        raise ValueError(
            f"--fail-on: unknown verdict(s) {', '.join(bad)} (use drop, inconclusive, untested or none)"
        )
    return words


def parse_require(items: list[str] | None) -> dict[str, list[str]]:
    """``CAND=ship`` (or ``CAND=ship|inconclusive``) pairs to {candidate: allowed verdicts}."""
    out: dict[str, list[str]] = {}
    for item in items or []:
        cand, sep, allowed = item.partition("=")
        verdicts = [v.strip() for v in allowed.split("|") if v.strip()]
        if not sep or not cand.strip() or not verdicts or any(v not in VERDICTS for v in verdicts):
            raise ValueError(
                f"--require {item!r}: expected CANDIDATE=VERDICT with VERDICT one of {', '.join(VERDICTS)}"
            )
        out[cand.strip()] = verdicts
    return out


def evaluate(
    decision: dict, run: str, fail_on: list[str], require: dict[str, list[str]], partial: list[str]
) -> GateResult:
    """Apply the job's requirements to a decision; ``partial`` lists why the result set is incomplete."""
    res = GateResult(run=run, fail_on=fail_on, require=require)
    verdicts = decision.get("verdicts", {})
    if not verdicts:
        res.failures.append("empty result set: no candidate was judged")
    res.failures += [f"partial result set: {p}" for p in partial]
    for cand, v in verdicts.items():
        if v["verdict"] in fail_on:
            res.candidate_failures[cand] = f"verdict {v['verdict']} is in --fail-on ({', '.join(fail_on)})"
    for cand, allowed in require.items():
        if cand not in verdicts:
            res.failures.append(f"required candidate {cand} has no verdict in this run")
        elif verdicts[cand]["verdict"] not in allowed:
            msg = f"required {'|'.join(allowed)}, got {verdicts[cand]['verdict']}"
            prev = res.candidate_failures.get(cand)
            res.candidate_failures[cand] = f"{prev}; {msg}" if prev else msg
    res.failures += [f"{c}: {why}" for c, why in res.candidate_failures.items()]
    return res


def gate_json(decision: dict, res: GateResult) -> str:
    """Canonical JSON: sorted keys, fixed separators, UTF-8, one trailing newline."""
    doc = {"gate": {**asdict(res), "passed": res.passed, "exit_code": res.exit_code}, "decision": decision}
    return json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def gate_markdown(decision: dict, res: GateResult) -> str:
    st = decision.get("stats", {})
    head = "PASSED" if res.passed else "FAILED"
    out = [f"## evalkit gate: {head} (exit {res.exit_code})", "", f"Run: `{res.run}`", ""]
    if st:
        out += [
            f"{st.get('method')}, {st.get('resamples')} resamples, seed {st.get('seed')}, α {st.get('alpha')} "
            f"(one-sided; intervals {st.get('ci_level', 0) * 100:g}%), estimand: {st.get('estimand')}, "
            f"unit: {st.get('unit')}. Rules: {st.get('rules')}.",
            "",
        ]
    if decision.get("noise_note"):
        out += [f"Noise floor: {decision['noise_note']}.", ""]
    verdicts = decision.get("verdicts", {})
    if verdicts:
        out += [
            "| candidate | verdict | gate | deciding metric | sessions | reason |",
            "|---|---|---|---|---|---|",
        ]
        for cand, v in verdicts.items():
            gate = "fail" if cand in res.candidate_failures else "ok"
            reason = v["reason"].replace("|", "\\|")
            out.append(
                f"| {cand} | **{v['verdict']}** | {gate} | {v['deciding_metric'] or '–'} | {v['n_sessions']} | {reason} |"
            )
        out.append("")
    if res.failures:
        out += ["Why the gate failed:", ""] + [f"- {f}" for f in res.failures] + [""]
    else:
        fo = ", ".join(res.fail_on) or "nothing"
        out += [f"No candidate verdict is in --fail-on ({fo}) and every requirement holds.", ""]
    return "\n".join(out)


def gate_junit(decision: dict, res: GateResult) -> str:
    """JUnit XML: one test case per candidate; a failure where the gate fails it."""
    verdicts = decision.get("verdicts", {})
    suite = ET.Element("testsuite", name="evalkit gate", tests=str(len(verdicts)))
    n_fail = 0
    for cand, v in verdicts.items():
        tc = ET.SubElement(suite, "testcase", classname="evalkit.gate", name=cand)
        if cand in res.candidate_failures:
            n_fail += 1
            ET.SubElement(tc, "failure", message=f"{v['verdict']}: {res.candidate_failures[cand]}").text = v[
                "reason"
            ]
        elif v["verdict"] == "untested":
            ET.SubElement(tc, "skipped", message=v["reason"])
        ET.SubElement(tc, "system-out").text = v["reason"]
    # Failures of the result set as a whole (empty, partial, a required candidate absent) get their own case.
    whole = [f for f in res.failures if not any(f.startswith(f"{c}: ") for c in res.candidate_failures)]
    if whole:
        n_fail += 1
        tc = ET.SubElement(suite, "testcase", classname="evalkit.gate", name="(result set)")
        ET.SubElement(tc, "failure", message=whole[0]).text = "\n".join(whole)
        suite.set("tests", str(len(verdicts) + 1))
    suite.set("failures", str(n_fail))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def write_gate(decision: dict, res: GateResult, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write gate.json, then gate.md, then junit.xml (and append the Markdown to $GITHUB_STEP_SUMMARY)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "gate.json", "markdown": out / "gate.md", "junit": out / "junit.xml"}
    md = gate_markdown(decision, res)
    for key, text in (
        ("json", gate_json(decision, res)),
        ("markdown", md),
        ("junit", gate_junit(decision, res)),
    ):
        with AtomicWriter(paths[key]) as fh:
            fh.write(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(md + "\n")
    return paths
