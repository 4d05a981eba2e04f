"""Section 6, noise floor: the A/A arm's spread, the smallest effect the run could see."""

from __future__ import annotations

import math
from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import (
    code,
    interval,
    num,
    table,
)
from evalkit.report.sections.common import as_float, confidence, questions_left_out, split_questions


def section_noise(data: ReportData, out: Path) -> list[str]:
    nf = data.decision.noise_floor
    if not nf:
        state = (
            "has no `noise_floor`"
            if "noise_floor" not in data.decision.model_fields_set
            else "has an empty `noise_floor`"
        )
        return [
            f"Not measured: `decision.json` {state}. An A/A comparison (the baseline against itself with "
            "another replicate) shows how large a difference arises from noise alone; without it, read "
            "effects near zero with care."
        ]
    rows = []
    listed, families = split_questions(sorted(nf))
    # The metrics verdicts use; the rest of the floor is in decision.json (and the viewer).
    used = {m for v in data.verdicts.values() for m in v.metrics}
    others = [m for m in listed if m not in used] if used & set(listed) else []
    listed = [m for m in listed if m not in others]
    for metric in listed:
        d = nf[metric]
        ci = d.get("ci")
        width = (
            as_float(ci[1]) - as_float(ci[0]) if isinstance(ci, list | tuple) and len(ci) == 2 else math.nan
        )
        rows.append(
            [
                code(metric),
                num(d.get("aa_estimate"), signed=True),
                interval(ci),
                num(width),
                str(d.get("n_sessions", "n/a")),
            ]
        )
    note = data.decision.noise_note.strip()
    return [
        "The baseline compared with itself (another replicate). A candidate's effect inside this spread is "
        "indistinguishable from re-running the baseline.",
        "",
        *([f"**{escape_inline(note.rstrip('.'))}.**", ""] if note else []),
        *questions_left_out(families, "in the noise floor"),
        *(
            [
                f"Listed: the {len(listed)} metrics verdicts use; `decision.json` has the other {len(others)}.",
                "",
            ]
            if others
            else []
        ),
        # A table of zeros says less than one sentence does.
        f"Every listed A/A difference and interval is exactly zero ({len(listed)} metrics)."
        if listed and all(nf[m].get("exactly_zero") for m in listed)
        else table(["metric", "A/A difference", f"{confidence(data)}", "interval width", "n sessions"], rows),
    ]
