"""The report's sections, in the order a reader needs them (issue #9).

Each section is ``fn(data, out_dir) -> list[str]`` of Markdown lines, one module per section. A
section whose inputs are missing says which file or key is missing and what would fill it, instead
of disappearing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import heading_anchor
from evalkit.report.sections import scorecard as _scorecard
from evalkit.report.sections.cadence import section_cadence
from evalkit.report.sections.calibration import section_calibration
from evalkit.report.sections.caveats import section_caveats
from evalkit.report.sections.common import continuation_manifest, is_standin
from evalkit.report.sections.compounding import section_compounding
from evalkit.report.sections.cost import section_cost
from evalkit.report.sections.effects import section_effects
from evalkit.report.sections.evidence import section_evidence
from evalkit.report.sections.health import section_health
from evalkit.report.sections.noise import section_noise
from evalkit.report.sections.runfacts import section_run_facts
from evalkit.report.sections.verdicts import section_verdicts


def preamble(data: ReportData, titles: list[str]) -> list[str]:
    out = [f"# evalkit report: {escape_inline(data.name)}", ""]
    model = data.config.get("model", {})
    if is_standin(data):
        out += [
            f"> **Offline stand-in.** Summaries come from the `{model.get('backend')}` backend, a "
            "deterministic extractive summarizer, not a language model. Use these numbers to check the "
            "pipeline, not to judge a compactor.",
            "",
        ]
    cont = continuation_manifest(data)
    if cont.get("proxy"):
        out += [
            f"> **Proxy agent.** Continuation metrics come from the `{cont.get('agent')}` agent: a proxy "
            "for information availability (does the compacted context still show what the next steps "
            "need?), not a model's behaviour.",
            "",
        ]
    out += [
        "This report compares compaction strategies (*arms*) replayed over the same recorded sessions. "
        f"Each candidate is compared with the baseline `{data.baseline}`; every effect is "
        "*candidate − baseline*, resampled by session (the session is the unit).",
        "",
        "Contents: " + " · ".join(f"[{t}](#{heading_anchor(t)})" for t in titles),
        "",
    ]
    return out


SECTIONS: list[tuple[str, Callable[[ReportData, Path], list[str]]]] = [
    ("Verdicts at a glance", section_verdicts),
    ("Calibration of the rules", section_calibration),
    ("Metric health", section_health),
    ("Run facts", section_run_facts),
    ("Effects", section_effects),
    ("Compounding and size", section_compounding),
    ("Evidence per candidate", section_evidence),
    ("Scorecard: exam score vs tokens kept", _scorecard.section_scorecard),
    ("Cadence and cost per compaction", section_cadence),
    ("Noise floor", section_noise),
    ("Cost: planned vs actual", section_cost),
    ("Caveats", section_caveats),
]
