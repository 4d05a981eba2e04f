"""The report's sections, in the order a reader needs them (issues #9, #40).

The first screen answers: the verdicts with what decided each, the warnings that change how to
read them, and one figure of every candidate's effects. The sections after it are reference.

Each section is ``fn(data, out_dir) -> list[str]`` of Markdown lines, one module per section,
registered by one :class:`Section` line in :data:`SECTIONS`. A section whose inputs are missing
says which file or key is missing and what would fill it, instead of disappearing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import heading_anchor
from evalkit.report.sections import scorecard as _scorecard
from evalkit.report.sections.bank_questions import section_bank_questions
from evalkit.report.sections.cadence import section_cadence
from evalkit.report.sections.calibration import section_calibration
from evalkit.report.sections.caveats import section_caveats
from evalkit.report.sections.common import continuation_manifest, is_standin
from evalkit.report.sections.compounding import section_compounding
from evalkit.report.sections.cost import section_cost
from evalkit.report.sections.effects import section_effects, section_means
from evalkit.report.sections.evidence import section_evidence
from evalkit.report.sections.health import section_health
from evalkit.report.sections.noise import section_noise
from evalkit.report.sections.overview import section_overview
from evalkit.report.sections.readfirst import section_read_first
from evalkit.report.sections.runfacts import section_run_facts
from evalkit.report.sections.verdicts import section_verdicts

SectionFn = Callable[[ReportData, Path], list[str]]


@dataclass(frozen=True)
class Section:
    """A report section: its heading, what renders it, and whether its body is folded in a
    ``<details>`` block (reference a reader opens on demand, under a heading that still links)."""

    title: str
    render: SectionFn
    folded: bool = False


def preamble(data: ReportData, titles: list[str]) -> list[str]:
    out = [f"# evalkit report: {escape_inline(data.name)}", ""]
    model = data.config.get("model", {})
    notices = []
    if is_standin(data):
        notices.append(
            f"**Offline stand-in.** Summaries come from the `{model.get('backend')}` backend, a "
            "deterministic extractive summarizer, not a language model: these numbers check the pipeline."
        )
    cont = continuation_manifest(data)
    if cont.get("proxy"):
        notices.append(
            f"**Proxy agent.** Continuation metrics come from the `{cont.get('agent')}` agent "
            "(information availability, not a model's behaviour)."
        )
    if notices:
        out += ["> " + " ".join(notices), ""]
    out += [
        f"Each candidate is compared with the baseline `{data.baseline}` over the same recorded sessions; "
        "every effect is *candidate − baseline*, the session is the unit. "
        "Contents: " + " · ".join(f"[{t}](#{heading_anchor(t)})" for t in titles),
        "",
    ]
    return out


# One line per section. Other stages' sections (warnings, bank questions, ...) are added here.
SECTIONS: list[Section] = [
    Section("Verdicts", section_verdicts),
    Section("Read these first", section_read_first),
    Section("Effects at a glance", section_overview),
    Section("Effects per metric", section_effects, folded=True),
    Section("Metric means", section_means, folded=True),
    Section("Evidence per candidate", section_evidence),
    Section("Scorecard: exam score vs tokens kept", _scorecard.section_scorecard),
    Section("Bank questions", section_bank_questions),
    Section("Compounding and size", section_compounding),
    Section("Metric health", section_health, folded=True),
    Section("Cadence and cost per compaction", section_cadence, folded=True),
    Section("Noise floor", section_noise, folded=True),
    Section("Calibration of the rules", section_calibration),
    Section("Cost: planned vs actual", section_cost),
    Section("Run facts", section_run_facts, folded=True),
    Section("Caveats", section_caveats),
]


def as_section(s: Section | tuple) -> Section:
    """A registry entry as a :class:`Section` (a plain ``(title, fn)`` pair is an unfolded one)."""
    return s if isinstance(s, Section) else Section(*s)
