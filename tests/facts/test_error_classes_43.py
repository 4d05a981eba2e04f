"""The constraint classes heldout43's measurement showed (tests/fixtures/labels/README.md), each
with a positive and a negative case on real-shaped text, read by grammatical form."""

from __future__ import annotations

from tests.support.facts import rules_of

# --------------------------------------------------------------------------- statements


def test_a_count_or_a_noun_subject_states_a_fact():
    text = (
        "Fix the failing tests.\n"
        "Only 5 main components have tests out of 14 main components.\n"
        "Test infrastructure needs improvement to handle context providers."
    )
    assert rules_of(text) == []


def test_only_and_test_as_verbs_still_state_rules():
    text = "Fix the failing tests.\nOnly edit main.py.\nTest the change before you commit."
    assert rules_of(text) == ["Only edit main.py.", "Test the change before you commit."]


# --------------------------------------------------------------------------- document content


def test_the_tone_of_a_document_to_revise_is_the_deliverable():
    text = "Audit and revise PROJECT_SUMMARY.md for accuracy.\n\nKeep it polished and judge-friendly."
    assert rules_of(text) == []


def test_keep_it_sets_the_work_when_the_request_is_code():
    text = "Audit and revise the parser for accuracy.\n\nKeep it backwards compatible."
    assert rules_of(text) == ["Keep it backwards compatible."]


# --------------------------------------------------------------------------- comments in pasted code


def test_a_warning_comment_of_pasted_code_is_quoted_material():
    text = (
        "check the ai part, it is not working\n\n# vulnerable_app.py\n"
        "# WARNING: This code is intentionally insecure. DO NOT use in production.\n\n"
        "from flask import Flask"
    )
    assert rules_of(text) == []


def test_a_heading_over_the_users_rules_still_holds_them():
    text = "Fix the login page.\n\n# Rules\nDo not push to main."
    assert rules_of(text) == ["Do not push to main."]


# --------------------------------------------------------------------------- debug steps


def test_a_check_of_a_state_of_the_code_is_a_debugging_step():
    text = (
        "The View Logs button does nothing. Debug and fix it.\n\n**Debug Steps:**\n"
        "1. Check if the onClick handler is properly defined\n2. Verify the state updates are correct"
    )
    assert rules_of(text) == []


def test_a_check_of_the_agents_own_work_is_process():
    text = "Fix the View Logs button.\n\nVerify the tests pass before you commit."
    assert rules_of(text) == ["Verify the tests pass before you commit."]


# --------------------------------------------------------------------------- test specifications


def test_a_labelled_test_to_write_is_the_task():
    text = (
        "Genera el archivo tests/test_llm.py.\n\n"
        "1. Test de call_llm (Happy Path): Mockea requests.post para que devuelva un JSON válido."
    )
    assert rules_of(text) == []


def test_test_as_a_process_verb_still_counts():
    text = "Genera el archivo tests/test_llm.py.\n\nTest the change before you commit."
    assert rules_of(text) == ["Test the change before you commit."]


def test_what_a_revised_document_keeps_is_the_deliverable():
    text = (
        "Audit and revise PROJECT_SUMMARY.md for accuracy.\n\n"
        "Keep the project sounding strong and hackathon-ready.\n"
        "Do not remove useful sections; just make the wording accurate."
    )
    assert rules_of(text) == []


def test_a_prohibition_on_the_work_in_a_document_request_still_counts():
    text = "Audit and revise PROJECT_SUMMARY.md for accuracy.\n\nDo not remove any files. Do not commit."
    assert rules_of(text) == ["Do not remove any files.", "Do not commit."]


# --------------------------------------------------------------------------- the request after a self-introduction


def test_the_request_after_a_self_introduction_is_the_task():
    text = "I am the Product/Integration Lead for PublicPulse AI.\n\nReview the current repository for integration readiness."
    assert rules_of(text) == []


def test_a_process_step_after_the_request_still_counts():
    text = "I am the lead for PublicPulse AI.\n\nReview the repository.\n\nRun the tests before you answer."
    assert rules_of(text) == ["Run the tests before you answer."]


# --------------------------------------------------------------------------- a prohibition over a list


def test_a_prohibition_over_a_list_is_one_rule_with_its_items():
    text = "Build the utility.\n\n2. **DO NOT Include in This Phase**:\n   - Unit tests (handled by other node)\n"
    assert rules_of(text) == ["DO NOT Include in This Phase: Unit tests (handled by other node)"]


def test_a_prohibition_without_a_list_stays_as_typed():
    text = "Build the utility.\n\nDo not push:\n\nThe branch is shared."
    assert rules_of(text) == ["Do not push:"]
