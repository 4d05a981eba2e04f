"""``evalkit init``: a starter experiment for a folder of sessions.

The sessions are imported into a canonical corpus beside the experiment (unless the folder is one
already), and the experiment compares the baseline, its A/A copy and one prompt variant defined by
settings alone, under a trigger chosen from the sessions' sizes
(:mod:`evalkit.replay.trigger_choice`): real sessions rarely reach a 200,000-token window.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evalkit.contracts.config import ExperimentConfig
from evalkit.contracts.records import CorpusManifest
from evalkit.contracts.runs import load_record
from evalkit.replay.trigger_choice import choose_trigger

VARIANT = "my-prompt"
INSTRUCTION = "Target about 300 words in all; keep file paths, commands and test results verbatim."


def _rows(corpus: Path) -> list[dict]:
    """Manifest-like rows (messages, bytes) per session of a canonical corpus."""
    manifest = corpus / CorpusManifest.NAME
    if manifest.is_file():
        rows = load_record(manifest, CorpusManifest).sessions
        if rows:
            return rows
    out = []
    with open(corpus / "sessions.jsonl", "rb") as fh:
        for line in fh:
            if line.strip():
                out.append({"messages": len(json.loads(line).get("messages", [])), "bytes": len(line)})
    return out


def starter_text(name: str, corpus_path: str, rows: list[dict], source: str) -> str:
    """The experiment file's text for a corpus of ``rows``."""
    defaults = ExperimentConfig()
    threshold = defaults.replay.window - defaults.replay.reserve
    c = choose_trigger(rows, threshold)
    why = (
        f"{c.reaching} of {c.sessions} sessions pass window - reserve = {threshold:,} tokens"
        if c.trigger == "tokens"
        else f"only {c.reaching} of {c.sessions} sessions reach window - reserve = {threshold:,} tokens "
        f"(the largest is about {c.largest_tokens:,}); a compaction every {c.max_messages} messages "
        f"(half the median session's {c.median_messages}) instead"
    )
    return f"""# Starter experiment written by `evalkit init` for {source}.
# Run it offline first, then against your endpoint (README, "Compare your own prompt"):
#   evalkit run --config {name}.toml
name = {json.dumps(name)}
seed = {defaults.seed}

[corpus]
kind = "path"
path = {json.dumps(corpus_path)}

[replay]
arms = ["baseline", "aa", "{VARIANT}"]
# {why}
{c.toml()}

# A prompt variant: the baseline's summarizer with one more instruction. Change it, add others
# (instructions, instructions_add, guidance, template, carry, keep_recent, trigger, max_messages).
[replay.variants.{VARIANT}]
description = "the baseline with one more instruction"
instructions_add = [{json.dumps(INSTRUCTION)}]

# What the variant must improve (shorter summaries); the project's guardrails (tally_present,
# constraints_kept, ...) and other rules apply too. `evalkit probes` lists the metrics.
[rules.candidates.{VARIANT}]
success = ["summary_tokens"]

[continuation]
enabled = false

# Against a real endpoint (the key comes from OPENAI_API_KEY, never from this file):
# [model]
# backend = "openai"
# model = "your-model"
# base_url = "http://localhost:8000/v1"
"""


def write_starter(src: str | os.PathLike, out: str | os.PathLike, name: str | None = None) -> Path:
    """Write ``<out>/<name>.toml`` (and ``<out>/corpus/`` when ``src`` is not a corpus already);
    returns the experiment file. Refuses to overwrite an existing experiment file."""
    src, out = Path(src), Path(out)
    if not src.exists():
        raise ValueError(f"{src}: no such folder")
    name = name or (src.resolve().name or "sessions").replace("/", "-")
    out.mkdir(parents=True, exist_ok=True)
    exp = out / f"{name}.toml"
    if exp.exists():
        raise ValueError(f"{exp}: exists; pass --name or --out to write another")
    if (src / "sessions.jsonl").is_file():
        corpus = src.resolve()
        corpus_path = os.path.relpath(corpus, out.resolve())
    else:
        from evalkit.importers import import_to_corpus, load_all

        load_all()
        corpus = out / "corpus"
        _, report = import_to_corpus([str(src)], str(corpus), "auto", False, {})
        if not report.sessions:
            raise ValueError(f"{src}: no session imported (`evalkit import auto {src} --out DIR` shows why)")
        corpus_path = "corpus"
    exp.write_text(starter_text(name, corpus_path, _rows(corpus), str(src)), encoding="utf-8")
    return exp
