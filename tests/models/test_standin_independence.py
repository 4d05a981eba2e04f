"""The offline stand-ins do not grade themselves: no module of the summarizer, the judge, the
agents or the validate candidate's validator imports the ground truth, the probes or the
generator (issue #16). Imports are read with ``ast``, so a lazy import inside a function counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evalkit.models.extractive import summarize
from evalkit.models.request import ChatRequest
from tests.conftest import ROOT

FORBIDDEN = (
    "evalkit.facts",
    "evalkit.score",
    "evalkit.synth",
    # the generator and its templates
    "evalkit.corpus.synth",
    "evalkit.corpus.outputs",
    "evalkit.corpus.phrasings",
)
STANDINS = [
    *sorted((ROOT / "evalkit/models").glob("*.py")),
    *sorted((ROOT / "evalkit/continuation/agents").glob("*.py")),
    ROOT / "evalkit/replay/validator.py",
]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from evalkit import facts`` counts as
    ``evalkit.facts``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def forbidden_imports(path: Path) -> list[str]:
    return sorted(
        m for m in imported_modules(path) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)
    )


def module_file(name: str) -> Path | None:
    """The file of an ``evalkit`` module (a package's ``__init__.py``), or None."""
    if name != "evalkit" and not name.startswith("evalkit."):
        return None
    base = ROOT / name.replace(".", "/")
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.exists():
            return f
    return None


def import_closure(path: Path) -> dict[str, str]:
    """Every evalkit module ``path`` reaches through import statements, transitively, each with
    the module that imports it (to name the chain in a failure). The package initialisers Python
    runs on the way to a submodule are not followed: they are loading order, not code the module
    uses (``evalkit/continuation/__init__.py`` re-exports the metrics, which read the facts)."""
    seen: dict[str, str] = {}
    todo = [path]
    done = set()
    while todo:
        f = todo.pop()
        if f in done:
            continue
        done.add(f)
        for m in imported_modules(f):
            g = module_file(m)
            if g is None:
                continue
            seen.setdefault(m, str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else f.name)
            todo.append(g)
    return seen


def forbidden_closure(path: Path) -> list[str]:
    return sorted(
        f"{m} (imported by {by})"
        for m, by in import_closure(path).items()
        if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)
    )


@pytest.mark.parametrize("path", STANDINS, ids=lambda p: str(p.relative_to(ROOT)))
def test_standin_imports_no_ground_truth_probe_or_generator(path):
    assert path.exists()
    assert forbidden_imports(path) == []


@pytest.mark.parametrize("path", STANDINS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nor_does_anything_a_standin_imports(path):
    """Transitively: the heuristic agent reads the recording (evalkit.continuation.recording),
    which reads tool calls with evalkit.common.toolcalls, not with the facts."""
    assert forbidden_closure(path) == []


def test_the_transitive_check_can_fail(tmp_path):
    """A stand-in that imports a neutral-looking module which imports the facts is caught."""
    closure = import_closure(ROOT / "evalkit/continuation/metrics.py")
    assert "evalkit.continuation.recording" in closure
    assert forbidden_closure(ROOT / "evalkit/corpus/compare.py")  # reads the facts, legitimately
    bad = tmp_path / "bad.py"
    bad.write_text("from evalkit.corpus.compare import measure\n")
    assert any(m.startswith("evalkit.facts") for m in forbidden_closure(bad))


def test_the_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from evalkit import facts\nimport evalkit.score.base\ndef f():\n    from evalkit.corpus.synth import x\n"
    )
    assert {"evalkit.corpus.synth", "evalkit.facts", "evalkit.score.base"} <= set(forbidden_imports(bad))


def test_the_offline_judge_lives_with_the_standins():
    assert (ROOT / "evalkit/models/offline_judge.py") in STANDINS


def _ask(system: str, convo: str, max_tokens: int = 4096) -> ChatRequest:
    return ChatRequest(
        model="extractive-v1",
        messages=(
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": f"<conversation>\n{convo}\n</conversation>\n\nSummarize the conversation above.",
            },
        ),
        max_tokens=max_tokens,
    )


CONVO = "\n\n".join(
    [
        "User: Port the ledger exporter to the new storage client.\nThe nightly job reads these files at 02:00 UTC.\n"
        "Leave the CSV column order exactly as it is.",
        *(
            f'Assistant: [tool call] Bash {{"command": "grep -rn entry{i} src/ledger"}}\n\n'
            f"[tool result] src/ledger/export.py:{i}: entry{i} = load_entry_{i}(row)"
            for i in range(60)
        ),
        "User: Then wire it into the CLI.",
    ]
)
TEMPLATE = "Write these sections:\n## Goal\n## Constraints & Preferences\n## Progress\n## Next Steps\n## Critical Context"


def test_a_user_line_without_any_rule_keyword_is_kept():
    """No keyword list decides what a user said: both lines of the request's follow-up survive."""
    text = summarize(_ask(TEMPLATE, CONVO)).text
    prefs = text.split("## Constraints & Preferences")[1].split("##")[0]
    assert "The nightly job reads these files at 02:00 UTC." in prefs
    assert "Leave the CSV column order exactly as it is." in prefs


def test_about_n_words_and_per_section_caps_are_followed():
    base = summarize(_ask(TEMPLATE, CONVO)).text
    short = summarize(
        _ask(
            TEMPLATE + "\nTarget about 120 words in all. Caps per section: Critical Context 2 bullets.", CONVO
        )
    ).text
    assert len(short) <= 160 * 4 < len(base)
    crit = short.split("## Critical Context")[1]
    assert len([ln for ln in crit.splitlines() if ln.startswith("- ")]) <= 2


def test_a_request_to_keep_lines_whole_is_followed():
    long_line = "User: " + "Keep the retry budget for the ledger export under the storage quota " * 4
    convo = CONVO.replace(
        "User: Then wire it into the CLI.", long_line.strip() + "\n\nUser: Then wire it into the CLI."
    )
    cut = summarize(_ask(TEMPLATE, convo)).text
    whole = summarize(_ask(TEMPLATE + "\nKeep the user's lines verbatim.", convo)).text
    said = long_line[len("User: ") :].strip()
    assert said not in cut and said in whole
