"""The error classes heldout40's measurement showed (tests/fixtures/labels/README.md), each with a
positive and a negative case on a real-shaped sample: symbols in aider's whole-file listings, C#
modifiers and TypeScript arrow functions with return types, interfaces (not definitions)."""

from __future__ import annotations

from evalkit.facts import compute_facts
from evalkit.facts.identifiers import symbols
from evalkit.importers import import_paths
from tests.support.facts import ids_of

# --------------------------------------------------------------------------- symbols from edit text

_WHOLE = """# aider chat started at 2025-05-23 18:13:33

> Model: gemini-2.5-pro with whole edit format

#### Create only `lru_cache.py`.

Here is the file:

lru_cache.py
```
from collections import OrderedDict

class LRUCache:

    def __init__(self, capacity: int):
        self.cache = OrderedDict()

    # def old_get(self, key):
```

> Applied edit to lru_cache.py
"""


def _aider(tmp_path, text: str):
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(text)
    (s,), _ = import_paths([p])
    return compute_facts(s)


def test_an_aider_whole_file_listing_gives_its_definition_lines(tmp_path):
    f = _aider(tmp_path, _WHOLE)
    assert ids_of(f, "symbol") == {"LRUCache", "__init__"}  # not the commented-out old_get
    assert [x.path for x in f.files_modified] == ["lru_cache.py"]


def test_a_fenced_listing_without_a_file_line_is_no_edit(tmp_path):
    # A code sample in prose ("For example:") is not aider's whole-file edit.
    text = _WHOLE.replace("lru_cache.py\n```", "For example:\n```").replace(
        "> Applied edit to lru_cache.py\n", ""
    )
    assert ids_of(_aider(tmp_path, text), "symbol") == set()


def test_c_sharp_modifiers_and_typescript_arrow_functions_with_return_types():
    text = (
        "namespace PirateGame.Core\n{\n    public sealed class ItemData : ScriptableObject\n    {\n"
        "        public void Trade() {}\n    }\n}\n"
        "const mapDBUserToBFF = (dbUser: any): User => ({\n"
        "export const getUserById = async (userId: string): Promise<User | null> => {\n"
        "export const createUser = async (\n  data: CreateUserDTO,\n  hash = hashPassword(p),\n): Promise<User> => {\n"
        "export default function AdminLoginPage() {\n"
    )
    assert list(symbols(text)) == [
        "ItemData",
        "mapDBUserToBFF",
        "getUserById",
        "createUser",
        "AdminLoginPage",
    ]


def test_interfaces_type_aliases_calls_and_comparisons_are_not_definitions():
    text = (
        "export interface CreateCategoryDTO {\n  name: string;\n}\n"
        "type CategoryResponse = { id: string };\n"
        "const handler = useCallback(() => save(), []);\n"
        "const ok = a >= b;\n"
        "export const X: Provider = { provide: 'x' };\n"
        "describe('svc', () => {\n"
        "        public void Trade() {}\n"
    )
    assert list(symbols(text)) == []


def test_urls_in_a_whole_file_listing_are_content_but_urls_in_prose_count(tmp_path):
    text = _WHOLE.replace(
        "        self.cache = OrderedDict()\n", '        self.origin = "http://localhost:3000"\n'
    ).replace("Here is the file:", "See https://docs.python.org/3/library/collections.html first.")
    assert ids_of(_aider(tmp_path, text), "url") == {"https://docs.python.org/3/library/collections.html"}


# --------------------------------------------------------------------------- aider importer fidelity

# aider 0.86 prefixes only the first line of a multi-line status with "> ".
_NO_MATCH_086 = """# aider chat started at 2025-12-22 00:35:39

#### let the requester approve too

sc/src/SupplyChain.sol
```
<<<<<<< SEARCH
function approveRoleRequest(uint256 _requestId) public {
=======
function approveRoleRequest(uint256 _requestId) external {
>>>>>>> REPLACE
```

> The LLM did not conform to the edit format.⏎
> # 1 SEARCH/REPLACE block failed to match!

## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in sc/src/SupplyChain.sol
<<<<<<< SEARCH
function approveRoleRequest(uint256 _requestId) public {
=======
function approveRoleRequest(uint256 _requestId) external {
>>>>>>> REPLACE

The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc⏎
> Commit fc286a7 Here is the one-line commit message for the changes:
feat: add supply chain contract

I read the file again.
""".replace("⏎", "  ")  # aider's Markdown line break ends a status message


def test_an_aider_086_failed_match_report_is_one_failing_edit_of_the_file_it_names(tmp_path):
    f = _aider(tmp_path, _NO_MATCH_086)
    assert [(x.tool, x.command) for x in f.failures] == [("edit", "edit sc/src/SupplyChain.sol")]
    assert ids_of(f, "error") == {
        "SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in sc/src/SupplyChain.sol"
    }
    # The commit after the failed edit keeps its SHA; a failed edit modified nothing.
    assert "fc286a7" in ids_of(f, "sha")
    assert f.files_modified == []
    assert ids_of(f, "symbol") == {"approveRoleRequest"}


def test_an_all_prefixed_failed_match_report_ends_at_the_next_text(tmp_path):
    # Before 0.86 every line of the report is prefixed; the generic wording names no file.
    text = _NO_MATCH_086.split("> The LLM")[0] + (
        "> # 1 SEARCH/REPLACE block failed to match!\n>\n"
        "> ## SearchReplaceNoExactMatch: The SEARCH section must exactly match an existing block of lines\n"
        "\nI will copy the lines exactly this time.\n"
    )
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(text)
    (s,), _ = import_paths([p])
    f = compute_facts(s)
    assert [x.tool for x in f.failures] == ["edit"]
    assert ids_of(f, "error") == set()
    assert s.messages[-1].role == "assistant" and "copy the lines exactly" in s.messages[-1].text


# --------------------------------------------------------------------------- lint reports

_LINT = """# aider chat started at 2025-03-18 13:02:09

#### add a license badge and tests

README.md
```
<<<<<<< SEARCH
# Tool
=======
# Tool [![License](badge.svg)](LICENSE)
>>>>>>> REPLACE
```

tests/test_readme.py
```
<<<<<<< SEARCH
=======
import re

def test_badge():
    pass
>>>>>>> REPLACE
```

> Applied edit to README.md⏎
> Applied edit to tests/test_readme.py⏎
> Commit 98406d1 feat: Add license badge⏎
>⏎
> # Fix any errors below, if possible.⏎
>⏎
> ## Running: pylint README.md⏎
>⏎
> README.md:3:7: E0001: Parsing failed: 'invalid syntax (README, line 3)' (syntax-error)⏎
>⏎
>⏎
> # Fix any errors below, if possible.⏎
>⏎
> ## Running: pylint tests/test_readme.py⏎
>⏎
> tests/test_readme.py:3:0: W0611: Unused import re (unused-import)⏎
> tests/test_readme.py:4:0: W0611: Unused import subprocess (unused-import)⏎
>⏎
> Attempt to fix lint errors? (Y)es/(N)o [Yes]: y⏎

README.md
```
<<<<<<< SEARCH
# Tool [![License](badge.svg)](LICENSE)
=======
# Tool

[![License](badge.svg)](LICENSE)
>>>>>>> REPLACE
```

tests/test_readme.py
```
<<<<<<< SEARCH
import re
=======
>>>>>>> REPLACE
```

> Applied edit to README.md⏎
> Applied edit to tests/test_readme.py⏎
>⏎
> # Fix any errors below, if possible.⏎
>⏎
> ## Running: pylint README.md⏎
>⏎
> README.md:3:7: E0001: Parsing failed: 'invalid syntax (README, line 3)' (syntax-error)⏎
>⏎
> Attempt to fix lint errors? (Y)es/(N)o [Yes]: y⏎
> Only 3 reflections allowed, stopping.⏎
""".replace("⏎", "  ")


def test_each_file_an_aider_lint_run_reports_fails_its_own_edit_with_its_first_diagnostic(tmp_path):
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(_LINT)
    (s,), _ = import_paths([p])
    f = compute_facts(s)
    assert [(x.command, x.source, x.fixed_at is not None) for x in f.failures] == [
        ("edit README.md", "lint", False),  # failed again after the second edit: never fixed
        ("edit tests/test_readme.py", "lint", True),  # the second edit drew no report on it
        ("edit README.md", "lint", False),
    ]
    assert ids_of(f, "error") == {
        "README.md:3:7: E0001: Parsing failed: 'invalid syntax (README, line 3)' (syntax-error)",
        "tests/test_readme.py:3:0: W0611: Unused import re (unused-import)",
    }
    reports = [m.text for m in s.messages if m.meta.get("harness") == "aider lint"]
    assert len(reports) == 2 and not any("Attempt to fix" in r or r != r.rstrip() for r in reports)


def test_a_lint_report_naming_only_files_no_edit_wrote_fails_no_edit(tmp_path):
    # Negative: reports on files no edit wrote (another linted file) fail none of the edits.
    one = _LINT.split("\n\nREADME.md\n```\n<<<<<<< SEARCH\n# Tool [")[0]
    one = (
        one.replace("pylint tests/test_readme.py", "pylint other.py")
        .replace("tests/test_readme.py:3:0", "other.py:3:0")
        .replace("tests/test_readme.py:4:0", "other.py:4:0")
    )
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(
        one.replace("## Running: pylint README.md", "## Running: pylint docs.md").replace(
            "README.md:3:7", "docs.md:3:7"
        )
    )
    (s,), _ = import_paths([p])
    f = compute_facts(s)
    assert f.failures == []


# --------------------------------------------------------------------------- constraints


def test_typographic_apostrophes_mark_prohibitions_and_are_kept_as_typed():
    from tests.support.facts import rules_of

    assert rules_of("Plan the screens.\nDon’t write any code yet") == ["Don’t write any code yet"]
    text = "Build the chart page. (Don’t use external libraries)\nAgain, keep everything simple and don’t use external libraries."
    assert rules_of(text) == [
        "(Don’t use external libraries)",
        "Again, keep everything simple and don’t use external libraries.",
    ]
    # Negative: a statement with the same apostrophe states no rule.
    assert rules_of("Build the chart page.\nI don’t know why it fails.") == []


def test_scope_versions_and_order_rules():
    from tests.support.facts import rules_of

    assert rules_of("Implement an LRU cache.\nCreate only `lru_cache.py`. Don't run it.") == [
        "Create only `lru_cache.py`.",
        "Don't run it.",
    ]
    assert rules_of("Set up the API.\nUse the exact package versions from my requirements.txt.") == [
        "Use the exact package versions from my requirements.txt."
    ]
    assert rules_of("Improve code quality. TDD! Add tests for task first before making changes.") == [
        "Add tests for task first before making changes."
    ]
    # Negatives: a report of what was done, a creation that is the task, a version said as a fact.
    assert rules_of("Fix the parser.\nWe ran it before making changes.") == []
    assert rules_of("Create the `lru_cache.py` module.") == []
    assert rules_of("Fix the parser.\nThe exact versions are in requirements.txt.") == []


def test_pasted_error_lines_in_a_user_turn_are_the_tools_words():
    from tests.support.facts import rules_of

    pasted = (
        "Fix the failing unit test:\n\n"
        "✖ ERROR: Error: Cannot find module '/app/node_modules/db/index.js'. Please verify that the "
        'package.json has a valid "main" entry\n'
        "Error: Cannot find module 'ts-node/register'\n"
    )
    assert rules_of(pasted) == []
    # Negative: the user's own rule after the paste still counts; "Error handling:" is no label.
    assert rules_of(pasted + "Do not touch the db package.\nError handling: never swallow exceptions.") == [
        "Do not touch the db package.",
        "Error handling: never swallow exceptions.",
    ]


def test_the_last_item_of_a_serial_list_stays_with_the_rule():
    from tests.support.facts import rules_of

    text = "Improve the tool.\nKeep notes in notes.md of e.g. todos, what you did, issues, plans, and things to keep in mind"
    assert rules_of(text) == [
        "Keep notes in notes.md of e.g. todos, what you did, issues, plans, and things to keep in mind"
    ]
    # Negative: a task clause after ", and" is still cut from the rule.
    assert rules_of(
        "Fix it.\nRun the agents in the background, and while we wait write a short poem about it"
    ) == ["Run the agents in the background"]


def test_reading_steps_command_choice_and_scope_colon_in_a_cline_task():
    from tests.support.facts import rules_of

    task = (
        "Finish the unit tests for the remaining services.\n"
        "Look eg. at the transactionService to see how we did it, because the remaining tests should "
        "do it in the same way.\n"
        "Keep in mind that we have a dedicated script inside the package.json for the service tests. "
        "Have a look at that and enter the appropriate command.\n"
        "Start with the category entitiy and only do the adaptations for:\n"
    )
    assert rules_of(task) == [
        "Look eg. at the transactionService to see how we did it, because the remaining tests should do it "
        "in the same way.",
        "Have a look at that and enter the appropriate command.",
        "Start with the category entitiy and only do the adaptations for:",
    ]


def test_considerations_offers_and_an_opening_look_are_no_rules():
    from tests.support.facts import rules_of

    # Negatives: a statement after "Keep in mind", an offer for when the agent wants more, a look
    # that is the request itself, and "look" as a verb of the code.
    assert rules_of("Fix it.\nKeep in mind that we have a dedicated script for the service tests.") == []
    assert (
        rules_of("Review the diff.\nIf you need more context about the changes, have a look at git diff.")
        == []
    )
    assert rules_of("Have a look at the login page.") == []
    assert rules_of("Fix it.\nThe button should look at the theme first.") == []


# --------------------------------------------------------------------------- identifiers in messages


def test_a_list_of_issue_numbers_after_one_keyword_names_each():
    from evalkit.facts.identifiers import in_text

    assert {v for k, v in in_text("See issues #32934 and #26930 for the history.") if k == "pr"} == {
        "#32934",
        "#26930",
    }
    assert {v for k, v in in_text("Fixed PRs #1, #2 & #3.") if k == "pr"} == {"#1", "#2", "#3"}
    # Negative: a number after a list of other words is no issue ("step 2 and #3 of the list").
    assert [v for k, v in in_text("Do step 2 and #3 of the list.") if k == "pr"] == []


# --------------------------------------------------------------------------- turns aider relayed

_RELAY = """# aider chat started at 2026-02-23 00:50:06

#### /code Set up the API. Use the exact package versions from my requirements.txt.

#### Set up the API. Use the exact package versions from my requirements.txt.

Please run the build command: `make`. Do not skip the tests.

#### Please run the build command: `make`. Do not skip the tests.

Running it.

#### Please run the build command again. Do not skip the tests.
"""


def test_a_command_echo_and_an_architect_relay_are_not_the_users_words(tmp_path):
    p = tmp_path / ".aider.chat.history.md"
    p.write_text(_RELAY)
    (s,), _ = import_paths([p])
    f = compute_facts(s)
    assert [(s.messages[c.message_index].meta.get("harness"), c.text) for c in f.constraints] == [
        (None, "Use the exact package versions from my requirements.txt."),
        # Negative: a turn the user typed after the model's reply, not a copy of it, is the user's.
        (None, "Do not skip the tests."),
    ]
    assert [m.meta.get("harness") for m in s.messages if m.role == "user"] == [
        None,
        "aider command echo",
        "aider architect relay",
        None,
    ]


def test_not_allowed_with_the_agent_as_subject_is_a_prohibition():
    from tests.support.facts import rules_of

    rule = (
        "You are NOT allowed to explore the repository or run any bash commands until you have "
        "completed this clarification phase."
    )
    assert rules_of("Fix the validator.\n" + rule) == [rule]
    # Negative: the code's subject makes it a requirement on the code.
    assert rules_of("Fix the validator.\nThe username is not allowed to end with a newline.") == []


def test_we_need_to_change_the_code_is_the_task_but_a_reason_keeps_its_rule():
    from tests.support.facts import rules_of

    assert (
        rules_of("Good.\nnext we need to increase the score when the pacman walks over the point object.")
        == []
    )
    assert (
        rules_of(
            "Finish the tests.\nAs with the other tests we have to make the necessary adaption to the Service "
            "itself to use Dependency Injection."
        )
        == []
    )
    # Negatives: a rule with "we" and a process verb, and a rule whose reason holds "we have to".
    assert rules_of("Fix it.\nWe have to run the linter before every commit.") == [
        "We have to run the linter before every commit."
    ]
    assert rules_of(
        "Adapt the entity.\nIgnore all Typescript errors, since we have to adapt the related entitites later on."
    ) == ["Ignore all Typescript errors, since we have to adapt the related entitites later on."]
