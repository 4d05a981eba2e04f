"""The offline stand-ins do not grade themselves (issue #16). That no module of the summarizer,
the judge, the agents or the validate candidate's validator imports the ground truth, the probes
or the generator, directly or through another module, is an import-linter contract in
pyproject.toml (``make test`` runs ``lint-imports``; tests/test_package.py checks the contract
names them). Here: the summarizer follows what a request asks without any such knowledge."""

from __future__ import annotations

from evalkit.models.extractive import summarize
from evalkit.models.request import ChatRequest


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
