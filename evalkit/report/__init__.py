"""Reports: Markdown with PNG figures from a run folder, and the comparison of two runs."""

from evalkit.report.build import render_report, write_report

__all__ = ["render_report", "write_report"]
