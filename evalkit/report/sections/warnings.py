"""The run's warnings for the report's first screen: what the run found a person must see before trusting it
(evalkit.pipeline.warnings: skipped sessions, arms that never compacted, failing scorers or judges),
and the endpoints the run sent session content to."""

from __future__ import annotations

from evalkit.report.data import ReportData
from evalkit.report.escape import escape_inline
from evalkit.report.markdown import code


def run_warnings(data: ReportData) -> list[str]:
    """The run's own warnings (``warnings.json``) and the endpoints it sent session content to, as
    Markdown bullets; the report shows them first, in "Read these first"."""
    from evalkit.contracts.runs import WARNINGS_FILE as FILE
    from evalkit.contracts.runs import read_warnings

    body = read_warnings(data.run_dir)
    if body is None:
        return [f"- _No `{FILE}` in the run folder (written by `evalkit run`): warnings not collected._"]
    out = [f"- ⚠ {escape_inline(w['text'])}" for w in body.warnings]
    eps = body.endpoints
    if eps:
        out += [
            f"- endpoint ({escape_inline(e['role'])}): {code(e['url'])} ({escape_inline(e['source'])}, "
            f"{'local' if e.get('local') else 'remote'})"
            for e in eps
        ]
    else:
        out.append("- endpoint: none; every model in this run is an offline stand-in")
    return out
