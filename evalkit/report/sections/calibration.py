"""Report section: the rules' calibration on this run's own data, from ``calibration.json`` (``evalkit calibrate``)."""

from __future__ import annotations

import shlex
from pathlib import Path

from evalkit.contracts.records import Calibration
from evalkit.contracts.runs import RecordVersionError, RunFolderError, load_record
from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import code


def section_calibration(data: ReportData, out: Path) -> list[str]:
    path = data.paths.calibration
    if not path.is_file():
        # Quoted for a shell: the hint is meant to be pasted, and run paths may hold spaces or ';'.
        return [
            "Not measured for this run: "
            + code(f"evalkit calibrate {shlex.quote(str(data.run_dir))}")
            + " estimates, from null experiments built out of this run's own differences, how often its "
            "rules ship, drop or pass by chance and their power at the reported MDE."
        ]
    try:
        cal = load_record(path, Calibration).model_dump(mode="json", exclude_unset=True)
    except RecordVersionError:
        raise
    except RunFolderError as e:
        return [f"`calibration.json` cannot be read ({escape_inline(str(e))}); rerun `evalkit calibrate`."]
    from evalkit.decide.calibrate import render

    try:
        return render(cal).splitlines()
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        return [
            f"`calibration.json` has an unexpected shape ({escape_inline(f'{type(e).__name__}: {e}')}); rerun `evalkit calibrate`."
        ]
