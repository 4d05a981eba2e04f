"""evalkit: offline evaluation harness for context-compaction strategies of LLM coding agents.

The public API, importable from here whatever module implements it (files can move without
breaking users; plugin docs import only from ``evalkit``). Names are loaded on first use, so
``import evalkit`` loads no stage:

- running and reading experiments: :func:`load_experiment`, :func:`run_experiment`, :func:`load_run`;
- corpora: :func:`read_sessions`, and a corpus as a Hugging Face dataset and back
  (:func:`to_dataset`, :func:`from_dataset`);
- the candidate seam: :class:`Policy` (a candidate is a function ``Policy -> Policy``);
- the registries and their decorators: :data:`CANDIDATES` / :func:`candidate`, :data:`PROBES` /
  :func:`probe`, :data:`BACKENDS`, :data:`AGENTS`, :data:`IMPORTERS` / :func:`importer`,
  :data:`TOKENIZERS`, :data:`EXECUTORS`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> "module:object"
_API = {
    "load_run": "evalkit.contracts.runs:load_run",
    "load_experiment": "evalkit.contracts.config:load_experiment",
    "Experiment": "evalkit.contracts.config:Experiment",
    "run_experiment": "evalkit.pipeline.run:run_experiment",
    "Policy": "evalkit.replay.compactor:Policy",
    "read_sessions": "evalkit.corpus.io:read_sessions",
    "to_dataset": "evalkit.corpus.dataset:to_dataset",
    "from_dataset": "evalkit.corpus.dataset:from_dataset",
    "CANDIDATES": "evalkit.replay.candidates:ARMS",
    "candidate": "evalkit.replay.candidates:arm",
    "PROBES": "evalkit.score.base:PROBES",
    "probe": "evalkit.score.base:probe",
    "BACKENDS": "evalkit.models.backends:BACKENDS",
    "AGENTS": "evalkit.continuation.agents:AGENTS",
    "IMPORTERS": "evalkit.importers:IMPORTERS",
    "importer": "evalkit.importers:register",
    "TOKENIZERS": "evalkit.common.tokens:TOKENIZERS",
    "EXECUTORS": "evalkit.pipeline.executors:EXECUTORS",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    ref = _API.get(name)
    if ref is None:
        raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
    module, _, attr = ref.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
