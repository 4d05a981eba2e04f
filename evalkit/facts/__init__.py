"""Ground truth per session, derived once and stored with the corpus (``facts.jsonl``).

Probes and continuation runs compare what a compacted context still shows against these facts:
test tallies, user constraints, failing tool calls, files read and modified, identifiers (PR
numbers, SHAs, URLs, branches, created directories, symbols, error strings) and the compactions
the recording harness itself performed. How well each kind holds on real sessions is measured
against hand labels by :mod:`evalkit.facts.check` (``evalkit facts --check``).
"""

from evalkit.facts.commands import command_of, normalize_command
from evalkit.facts.extract import (
    CompactionPoint,
    Constraint,
    Facts,
    Failure,
    FileTouch,
    Identifier,
    TallyFact,
    compute_facts,
    facts_from_dict,
    facts_to_dict,
    read_facts,
)
from evalkit.facts.tallies import TALLY_PARSERS, Tally, find_tally

__all__ = [
    "TALLY_PARSERS",
    "CompactionPoint",
    "Constraint",
    "Facts",
    "Failure",
    "FileTouch",
    "Identifier",
    "Tally",
    "TallyFact",
    "command_of",
    "compute_facts",
    "facts_from_dict",
    "facts_to_dict",
    "find_tally",
    "normalize_command",
    "read_facts",
]
