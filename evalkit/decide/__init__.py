"""The decide stage: paired statistics (:mod:`.stats`), ship rules (:mod:`.rules`), verdicts
(:mod:`.verdicts`) and the CI gate (:mod:`.gate`). ``decide_run`` is the pipeline's entry point."""

from evalkit.decide.rules import Rules, RulesError, parse_rules, read_rules_file, resolve_rules
from evalkit.decide.stage import decide, decide_run, summarize_metrics

__all__ = [
    "Rules",
    "RulesError",
    "decide",
    "decide_run",
    "parse_rules",
    "read_rules_file",
    "resolve_rules",
    "summarize_metrics",
]
