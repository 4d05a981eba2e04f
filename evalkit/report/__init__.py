"""Reports: Markdown (and, later, figures) from a run folder."""

from evalkit.report.markdown import write_report

__all__ = ["write_report"]
