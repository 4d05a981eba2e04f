"""Report section: the rules' calibration on this run's own data, from ``calibration.json`` (``evalkit calibrate``)."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline


def section_calibration(data: ReportData, out: Path) -> list[str]:
    path = data.run_dir / "calibration.json"
    if not path.is_file():
        return [
            "Not measured for this run: `evalkit calibrate "
            + escape_inline(str(data.run_dir))
            + "` estimates, from null experiments built out of this run's own differences, how often its "
            "rules ship, drop or pass by chance and their power at the reported MDE."
        ]
    try:
        cal = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return [f"`calibration.json` cannot be read ({escape_inline(str(e))}); rerun `evalkit calibrate`."]
    from evalkit.decide.calibrate import render

    return render(cal).splitlines()
