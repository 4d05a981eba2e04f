"""The constraint classes heldout42's measurement showed (tests/fixtures/labels/README.md), each
with a positive and a negative case on real-shaped text: the two tests of the written rule, a
directive addressed to the agent about how it works, read by grammar rather than by phrase."""

from __future__ import annotations

from evalkit.contracts.session import Message, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from evalkit.facts.check import same_rule
from tests.support.facts import rules_of, session_of

# --------------------------------------------------------------------------- answer language and form


def test_the_language_and_form_of_the_answer_is_a_rule():
    assert rules_of('/instructions "Always respond in Thai language. This is a strict requirement."') == [
        "Always respond in Thai language."
    ]
    assert rules_of('aider --model x --message "Respond ONLY in Thai from now on. This is mandatory."') == [
        "Respond ONLY in Thai from now on."
    ]
    assert rules_of("Fix these test failures. Return ONLY the fixed code — no explanation:") == [
        "Return ONLY the fixed code — no explanation:"
    ]
    assert rules_of("Problem: memory resets on restart.\nFix it.\n\nShow plan first.") == ["Show plan first."]
    text = "Port it.\n\nShow every single MCP tool call, the reasoning, the refactored code, and finally run the suite."
    assert rules_of(text) == [text.split("\n\n")[1]]


def test_thai_answer_rules_are_read_clause_by_clause():
    assert rules_of('"จากนี้ไปให้ตอบเป็นภาษาไทยเท่านั้น และช่วยสรุปหน้าที่ของไฟล์ launcher.py"') == [
        "จากนี้ไปให้ตอบเป็นภาษาไทยเท่านั้น"
    ]
    assert rules_of("หยุดตอบภาษาอังกฤษ! ฉันสั่งภาษาไทย คุณต้องตอบภาษาไทยเท่านั้น (Respond only in THAI). ") == [
        "หยุดตอบภาษาอังกฤษ!",
        "คุณต้องตอบภาษาไทยเท่านั้น (Respond only in THAI).",
    ]
    # Thai is scored character by character, as Chinese and Japanese are.
    assert same_rule("หยุดตอบภาษาอังกฤษ!", "หยุดตอบภาษาอังกฤษ!")
    assert not same_rule("หยุดตอบภาษาอังกฤษ!", "ฉันสั่งภาษาไทย")


def test_a_statement_about_language_or_a_hypothetical_modal_is_no_rule():
    assert rules_of("Add a locale switch. The bot should answer in French when asked.") == []
    assert rules_of("Fix it. I will respond in English.") == []
    # "อย่างไร" ("how") holds อย่า ("don't") but asks a question.
    assert rules_of("อธิบาย ว่ามันจัดการกับระบบ Security Agent อย่างไร") == []
    assert rules_of("Explain main.py. To analyze it, you would need to add main.py to the chat first.") == []


# --------------------------------------------------------------------------- the agent's own tools by name


def _bob_session(request: str, *tools: str):
    msgs = [Message("m0", "user", [Text(request)])]
    for k, name in enumerate(tools):
        msgs += [
            Message(f"a{k}", "assistant", [ToolCall(f"c{k}", name, {"path": "AGENTS.md"})]),
            Message(f"t{k}", "tool", [ToolResult(f"c{k}", "ok")]),
        ]
    return compute_facts(session_of(*msgs))


def test_a_tool_the_agent_has_is_a_tool_not_code():
    request = "Create an AGENTS.md file.\n\nAfter creating AGENTS.md, use attempt_completion to confirm the task is done."
    facts = _bob_session(request, "write_to_file", "attempt_completion")
    assert [c.text for c in facts.constraints] == [
        "After creating AGENTS.md, use attempt_completion to confirm the task is done."
    ]
    mcp = (
        "You are now using the JavaToDb2MigrationAssistant MCP server I created.\n\nPort the app to Db2.\n\n"
        "Follow these steps using the MCP tools:\n1. Use convertPostgresSchemaToDb2 on all Flyway migration files\n"
        "2. Update application.properties"
    )
    assert rules_of(mcp) == ["Use convertPostgresSchemaToDb2 on all Flyway migration files"]


def test_a_name_in_the_code_after_use_stays_the_task():
    # The same shape with a name the agent never calls as a tool and no MCP server named: code.
    facts = _bob_session("Fix the reader.\n\nThen use get_input to read the line.", "write_to_file")
    assert [c.text for c in facts.constraints] == []
    assert rules_of("Port it.\n1. Use convertPostgresSchemaToDb2 on all Flyway migration files") == []


# --------------------------------------------------------------------------- lead-ins and questions


def test_a_lead_in_to_a_block_and_a_question_for_an_account_are_no_rules():
    assert rules_of("Here's the script.\n\nRun it with:\n```bash\nts-node scripts/seed.ts\n```") == []
    assert rules_of("It still fails.\nCan you check further into why the 401 error could be occurring?") == []


def test_a_process_step_and_a_request_to_run_stay_rules():
    assert rules_of("Fix the seed.\nRun it with ts-node before you commit.") == [
        "Run it with ts-node before you commit."
    ]
    assert rules_of("Good.\nCould you please run the tests again?") == ["Could you please run the tests again?"]


# --------------------------------------------------------------------------- reading steps in aider turns


def test_a_reading_step_joined_to_the_action_it_informs_is_process():
    assert rules_of("ok look at qbtconf.txt and make the changes needed") == [
        "ok look at qbtconf.txt and make the changes needed"
    ]
    text = "failure; look at the output of the docker ps and use that output to determine what command to run"
    assert rules_of(text) == [text]
    assert rules_of("Read TODO.md and find the first task marked with [ ].") == [
        "Read TODO.md and find the first task marked with [ ]."
    ]
    text = "Try that write again but with sudo, or check the permissions or ownership on the file"
    assert rules_of(text) == [text]


def test_a_reading_request_alone_or_for_an_account_is_the_task():
    assert rules_of("ok take a look at /home/henry/qbtconf.txt") == []
    assert rules_of("read my library code of wcci http and tellme similarity with axios and difference") == []
    assert rules_of("ok try editing that file again, I've fixed the ownership") == []


# --------------------------------------------------------------------------- a list of what to deliver


def test_the_items_of_a_list_of_what_to_deliver_are_the_task():
    text = (
        "You are auditing the core repository.\nObjectives:\n1. Verify ESM compliance (ECMAScript Modules)\n"
        "2. Identify structural inconsistencies\n"
    )
    assert rules_of(text) == []
    text = "Now audit the overall structure and provide:\n1. A final checklist.\n2. Confirm ESM compliance across all files you have."
    assert rules_of(text) == []


def test_a_marked_rule_in_a_list_of_what_to_deliver_and_steps_elsewhere_still_count():
    text = "Write the report. Return:\n- The file path.\n- A 2-3 sentence summary of what you wrote."
    assert rules_of(text) == ["A 2-3 sentence summary of what you wrote."]
    assert rules_of("Fix the parser.\nSteps:\n1. Run the tests before you commit.") == [
        "Run the tests before you commit."
    ]


# --------------------------------------------------------------------------- the length of a document


def test_keep_it_short_in_a_request_for_a_document_is_the_document():
    text = (
        "Create an AGENTS.md file for this new project.\n\n"
        "Keep it very concise since there's no actual codebase to analyze yet."
    )
    assert rules_of(text) == []


def test_keep_it_short_elsewhere_is_the_answer_form():
    assert rules_of("Fix the login bug.\n\nKeep it very concise.") == ["Keep it very concise."]


# --------------------------------------------------------------------------- a terminal's echo of an input


def test_an_echo_after_aiders_mode_prompt_is_a_copy_of_the_screen():
    text = 'ask> "Stop answering in English! You must answer only in Thai."\n\nI understand you want Thai.'
    assert rules_of(text) == []


def test_the_same_words_typed_are_a_rule():
    assert rules_of("Stop answering in English! You must answer only in Thai.") == [
        "Stop answering in English!",
        "You must answer only in Thai."
    ]


# --------------------------------------------------------------------------- a "Task:" header and an "I want:" list


def test_the_request_after_a_task_header_and_the_items_wanted_are_the_task():
    text = (
        "IMPORTANT GIT RULES:\n- Work ONLY on branch: ui-5\n- Never merge into main\n\nTask:\n"
        "Analyze the current login page and propose the best UX for a lamp-based login screen.\n"
        "I want:\n- lamp idle state\n- pull cord interaction\n\nDo not code yet."
    )
    assert rules_of(text) == ["Work ONLY on branch: ui-5", "Never merge into main", "Do not code yet."]


def test_steps_under_your_task_are_still_read_one_by_one():
    text = (
        "Analyze the CLI and create a specification.\n\nYour task:\n"
        "1. Review existing CLI commands in `src/cli/commands/`\n2. Create the specification document"
    )
    assert rules_of(text) == ["Review existing CLI commands in `src/cli/commands/`"]


# --------------------------------------------------------------------------- "you need to" + the deliverable


def test_you_need_to_build_the_deliverable_is_the_task():
    assert rules_of("Hi.\nYou need to build desktop-first webapps, without focusing on responsiveness.") == []


def test_you_need_to_run_or_check_is_a_rule():
    assert rules_of("Fix it.\nYou need to run the tests after each change.") == [
        "You need to run the tests after each change."
    ]


# --------------------------------------------------------------------------- a modal prohibition on the code


def test_a_modal_prohibition_after_a_subject_of_the_code_is_no_rule():
    text = "Fix it.\nAn example of a username that currently passes validation but should not is `username\\n`."
    assert rules_of(text) == []


def test_a_modal_prohibition_on_the_agent_is_a_rule():
    assert rules_of("Fix it.\nYou should not touch the migrations.") == ["You should not touch the migrations."]


# --------------------------------------------------------------------------- version control forbidden by "without"


def test_without_commit_or_push_limits_version_control():
    text = "git add the features we added, then show me a commit message, without git commit and git push anything"
    assert rules_of("Good.\n" + text) == [text]


def test_without_in_the_code_is_the_task():
    assert rules_of("Fix it.\nThe script should run without network access errors.") == []


# --------------------------------------------------------------------------- a file pointed at with @


def test_a_file_pointed_at_with_an_at_mention_is_read_first():
    assert rules_of("Add 3 new MCP tools.\nReference @.bob/skills/build-mcp-server.md.") == [
        "Reference @.bob/skills/build-mcp-server.md."
    ]


def test_referencing_something_in_the_deliverable_is_the_task():
    assert rules_of("Add the endpoint.\nReference the new endpoint in the README.") == []
