"""evalkit: offline evaluation harness for context-compaction strategies of LLM coding agents."""

__version__ = "0.1.0"


def load_run(path):
    """Load a run folder for analysis (config, events, metrics, verdicts); see :mod:`evalkit.contracts.runs`."""
    from evalkit.contracts.runs import load_run as _load

    return _load(path)


__all__ = ["__version__", "load_run"]
