"""The error classes heldout41's measurement showed (tests/fixtures/labels/README.md), each with a
positive and a negative case on a real-shaped sample (the importer's side of Bob's tools is in
tests/importers/test_roo_bob_cline.py)."""

from __future__ import annotations

from evalkit.contracts.session import Message, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from evalkit.facts.identifiers import error_string, powershell_error
from tests.support.facts import ids_of, rules_of, session_of

# --------------------------------------------------------------------------- harness lint after an edit


def _problems(path: str, error: str | None) -> str:
    """A Roo/Bob write result with the harness's lint list for ``path``."""
    problems = (
        f"<problems>\n\nNew problems detected after saving the file:\n{path}\n- {error}</problems>\n"
        if error
        else ""
    )
    return (
        f"<file_write_result>\n<path>{path}</path>\n<operation>modified</operation>\n{problems}"
        "<notice>\n<i>You do not need to re-read the file, as you have seen all changes</i>\n</notice>\n"
        "</file_write_result>"
    )


def _edits(*outputs: str):
    msgs = [Message("m0", "user", [Text("Add the handler.")])]
    for k, out in enumerate(outputs):
        call = ToolCall(f"c{k}", "apply_diff", {"path": "mcp/server.py", "diff": "<<<<<<< SEARCH\n=======\n"})
        msgs += [Message(f"a{k}", "assistant", [call]), Message(f"t{k}", "tool", [ToolResult(f"c{k}", out)])]
    return compute_facts(session_of(*msgs))


_REFUSED = "<error_details>\nNo sufficiently similar match found at line: 69 (24% similar, needs 100%)\n</error_details>"
_LINT = '[basedpyright Error] 7 | from mcp.server import Server : Import "mcp.server" could not be resolved'


def test_an_edit_whose_own_lint_fails_fixes_no_earlier_failure(tmp_path):
    # The rule: a Cline write with Error lines under its own file is `fixed` only by a later write
    # with none there; the write that failed its lint does not fix the refused diff before it.
    f = _edits(_REFUSED, _problems("mcp/server.py", _LINT))
    assert [(x.source, x.fixed_at) for x in f.failures] == [("refusal", None), ("lint", None)]
    assert {i.value for i in f.identifiers if i.kind == "error"} == {
        "No sufficiently similar match found at line: 69 (24% similar, needs 100%)",
        _LINT,  # without the closing </problems> tag
    }


def test_a_later_clean_edit_fixes_both(tmp_path):
    f = _edits(_REFUSED, _problems("mcp/server.py", _LINT), _problems("mcp/server.py", None))
    assert [(x.source, x.fixed_at) for x in f.failures] == [("refusal", 6), ("lint", 6)]  # the third result


# --------------------------------------------------------------------------- PowerShell error records

_HEADER = (
    "Command executed in terminal  within working directory 'c:/Users/dev/proj'. Command execution was not "
    "successful, inspect the cause and adjust as needed.\nExit code: 1\nOutput:\n"
)
_PARSE = (
    "At line:1 char:13\n+ cd frontend && npm install\n+             ~~\n"
    "The token '&&' is not a valid statement separator in this version.\n"
    "    + CategoryInfo          : ParserError: (:) [], ParentContainsErrorRecordException\n"
    "    + FullyQualifiedErrorId : InvalidEndOfLine\n \n"
)
_NOT_RECOGNIZED = (
    "pytest : The term 'pytest' is not recognized as the name of a cmdlet, function, script file, or operable "
    "program. \nCheck the spelling of the name, or if a path was included, verify that the path is correct and "
    "try again.\nAt line:1 char:1\n+ pytest tests\\test_x.py -v\n+ ~~~~~~\n"
    "    + CategoryInfo          : ObjectNotFound: (pytest:String) [], CommandNotFoundException\n"
    "    + FullyQualifiedErrorId : CommandNotFoundException\n \n"
)


def test_a_powershell_error_records_first_message_line_is_the_error_string():
    assert (
        error_string(_HEADER + _PARSE) == "The token '&&' is not a valid statement separator in this version."
    )
    assert error_string(_HEADER + _NOT_RECOGNIZED) == (
        "pytest : The term 'pytest' is not recognized as the name of a cmdlet, function, script file, or "
        "operable program."
    )
    # Output the command printed before its error is not the message.
    printed = _HEADER + "Collecting packages...\n\n" + _NOT_RECOGNIZED
    assert error_string(printed).startswith("pytest : The term 'pytest'")


def test_plus_lines_without_an_error_record_are_no_powershell_error():
    # A diff's "+" lines and an "At line:" in a log: no CategoryInfo/FullyQualifiedErrorId record.
    out = _HEADER + "At line:1 char:1\n+ added line\n+ another\nThe token is fine.\n"
    assert powershell_error(out) is None


def _shell(output: str, exit_code=None):
    call = ToolCall("c1", "execute_command", {"command": "cd frontend && npm install"})
    msgs = [
        Message("m0", "user", [Text("Install the frontend.")]),
        Message("a1", "assistant", [call]),
        Message("t1", "tool", [ToolResult("c1", output, exit_code=exit_code)]),
    ]
    return compute_facts(session_of(*msgs))


def test_a_powershell_error_record_ending_the_output_fails_a_call_with_no_exit_code():
    # Cline records no exit codes: PowerShell's uncaught error record is its "command not found".
    f = _shell(_PARSE)
    assert [(x.source, x.exit_code) for x in f.failures] == [("crash", None)]
    assert ids_of(f, "error") == {"The token '&&' is not a valid statement separator in this version."}


def test_a_handled_powershell_error_followed_by_output_is_no_failure():
    f = _shell(_PARSE + "added 212 packages in 9s\n")
    assert f.failures == []


# --------------------------------------------------------------------------- ignore-file refusals


def test_an_ignore_file_block_is_a_refusal_with_its_line_as_error():
    out = (
        "Access to out/summary.md is blocked by the .rooignore file settings. You must try to continue in the "
        "task without using this file, or ask the user to update the .rooignore file."
    )
    f = _shell(out)
    assert [x.source for x in f.failures] == ["refusal"]
    assert ids_of(f, "error") == {out}


def test_blocked_in_a_commands_own_output_is_no_refusal():
    f = _shell(
        "Access to fetch at 'http://localhost:8000/api' from origin 'null' has been blocked by CORS policy\n"
    )
    assert f.failures == []


# --------------------------------------------------------------------------- constraints in other languages


def test_prohibitions_and_scope_limits_in_chinese_are_constraints():
    text = (
        "请对现有项目进行以下代码优化。\n\n**注意事项：**\n"
        "- **不要** 修改 `num_workers`，在 Windows 下保持为 0 以确保稳定性。\n"
        "- 请确保修改后的代码符合原有的项目架构。"
    )
    assert rules_of(text) == ["不要 修改 `num_workers`，在 Windows 下保持为 0 以确保稳定性。"]
    assert rules_of("只修改 dataset.py：\n实现 2.5D 数据加载安全校验。") == ["只修改 dataset.py："]
    assert rules_of("修复这个错误。你必须先运行测试。") == ["你必须先运行测试。"]
    assert rules_of("Arregla el bug.\nNo modifiques los tests.") == ["No modifiques los tests."]
    assert rules_of("Corrige le bug.\nNe modifiez pas les tests.") == ["Ne modifiez pas les tests."]


def test_a_chinese_request_or_a_code_requirement_is_no_constraint():
    # "Please return the centre slice's path" (what the code does), "make sure the imports are
    # right, don't break the existing features" (the code's behaviour, as in English).
    assert rules_of("实现边界检查。如果超出范围，请返回当前中心切片的路径。") == []
    assert rules_of("请创建文件。\n3. 确保所有导入路径正确，不要破坏 DeepLabV3+ 的现有功能。") == []
    assert (
        rules_of("Create the file.\nMake sure the imports are right, do not break the existing features.")
        == []
    )
    assert rules_of("Fix it.\nNo tests were harmed.") == []


def test_chinese_characters_are_words_when_a_rule_is_matched():
    from evalkit.facts.check import same_rule

    assert same_rule("不要修改测试文件。", "不要修改测试文件。")
    assert not same_rule("不要修改测试文件。", "只修改模型文件：")


# --------------------------------------------------------------------------- scope wordings


def test_minimal_changes_with_words_between_and_x_and_only_x_limit_scope():
    assert rules_of("Fix the bug.\nMake the minimal, correct code changes needed to resolve this issue.") == [
        "Make the minimal, correct code changes needed to resolve this issue."
    ]
    assert rules_of("Expand the server.\n\nScope (do this and ONLY this):\n\n1. Add three tools.") == [
        "Scope (do this and ONLY this):"
    ]


def test_a_minimal_design_or_only_said_of_two_things_is_no_scope_limit():
    assert rules_of("Fix it.\nThe change is minimal and correct.") == []
    assert rules_of("Fix it.\nThis and that are only examples.") == []
    assert rules_of("Fix it.\nA minimal, clean design of the changes page would help.") == []


# --------------------------------------------------------------------------- the form of the answer


def test_thoroughness_and_the_order_of_work_are_constraints():
    text = (
        "Perform a complete deep analysis of this entire codebase.\nGo file by file, line by line. For each "
        "file provide:\n\n1. PURPOSE\n\nBe thorough. Do not skip any file or any function."
    )
    assert rules_of(text) == [
        "Go file by file, line by line.",
        "Be thorough.",
        "Do not skip any file or any function.",
    ]


def test_go_and_be_in_other_senses_are_no_constraints():
    assert rules_of("Fix it.\nGo ahead and fix it. Be back soon. The tests go one by one in CI.") == []


# --------------------------------------------------------------------------- properties of the deliverable


def test_keeping_a_named_part_of_the_deliverable_so_is_the_task():
    assert rules_of("Build the app.\n- Keep the MVP functional and simple.") == []
    assert rules_of("Update the README.\nKeep the same documentation structure.") == []


def test_keeping_all_the_work_the_changes_or_the_answer_so_is_a_constraint():
    text = (
        "Build the app.\nAgain, keep everything simple and don't use external libraries. Keep the changes "
        "minimal. Keep your answer short."
    )
    assert rules_of(text) == [
        "Again, keep everything simple and don't use external libraries.",
        "Keep the changes minimal.",
        "Keep your answer short.",
    ]


# --------------------------------------------------------------------------- which packages the work uses


def test_a_package_or_service_chosen_for_a_purpose_is_a_constraint():
    text = (
        "## Instructions\n- Use lucide-react for icons. It is pre-installed.\n- For images, use unsplash.\n"
        "- For animations, use framer-motion, which is preinstalled."
    )
    assert rules_of("Build the app.\n" + text) == [
        "Use lucide-react for icons.",
        "For images, use unsplash.",
        "For animations, use framer-motion, which is preinstalled.",
    ]


def test_a_name_in_the_code_used_for_a_feature_is_the_task():
    text = (
        "Build the app.\nYou should use localStorage for storage, unless specifically requested otherwise.\n"
        "Use pytest.raises(ValidationError) for the negative case. Use it for the tests."
    )
    assert rules_of(text) == []


# --------------------------------------------------------------------------- the same attempt, made again


def test_preparing_steps_and_module_runs_leave_the_attempt_the_same():
    from evalkit.facts.failures import attempt_key

    def key(cmd: str, name: str = "execute_command") -> str:
        return attempt_key(ToolCall("c", name, {"command": cmd}))

    assert key(r".cruxvenv\Scripts\python.exe -m pytest tests\test_x.py -v") == key(
        r"pytest tests\test_x.py -v"
    )
    assert key(r".cruxvenv\Scripts\Activate.ps1; python -m crux.cli audit a.ipynb") == key(
        "cd c:/proj && python -m crux.cli audit a.ipynb"
    )
    assert key("Start-Sleep -Seconds 5; docker-compose logs frontend --tail=30") == key(
        "timeout /t 5 /nobreak >nul & docker-compose logs frontend --tail=30"
    )
    mcp = {"server_name": "careerpath-mcp", "tool_name": "get_skill_gap"}
    first = ToolCall("c1", "use_mcp_tool", {**mcp, "arguments": '{"employee_id": 123}'})
    again = ToolCall("c2", "use_mcp_tool", {**mcp, "arguments": '{"employee_id": 20}'})
    assert attempt_key(first) == attempt_key(again)


def test_another_command_or_tool_is_another_attempt():
    from evalkit.facts.failures import attempt_key

    def key(cmd: str) -> str:
        return attempt_key(ToolCall("c", "execute_command", {"command": cmd}))

    assert key("python -m pytest tests/test_a.py") != key("pytest tests/test_b.py")
    assert key("sleep 5; docker-compose logs frontend") != key("docker-compose logs backend")
    other = ToolCall(
        "c3", "use_mcp_tool", {"server_name": "careerpath-mcp", "tool_name": "get_industry_trends"}
    )
    same_server = ToolCall(
        "c4", "use_mcp_tool", {"server_name": "careerpath-mcp", "tool_name": "get_skill_gap"}
    )
    assert attempt_key(other) != attempt_key(same_server)


# --------------------------------------------------------------------------- when to stop, and committing


def test_working_until_the_build_passes_and_committing_after_are_process_steps():
    text = (
        "Implement the next task.\n5. If build.log contains 'error', fix the code until it compiles.\n"
        "6. Once build is clean, mark task as [x] in TODO.md and commit with a clear message."
    )
    assert rules_of(text) == [
        "If build.log contains 'error', fix the code until it compiles.",
        "Once build is clean, mark task as [x] in TODO.md and commit with a clear message.",
    ]


def test_until_and_commit_in_statements_are_no_constraints():
    text = "Do the task.\nThe loop runs until it succeeds. We tested it and commit daily. Show the commit message."
    assert rules_of(text) == []


# --------------------------------------------------------------------------- code that checks is the deliverable


def test_a_unit_of_code_that_checks_at_run_time_is_the_task():
    text = "Implement job health enforcement:\n2. Add a helper function to check job health requirements."
    assert rules_of(text) == []


def test_a_script_or_tests_made_to_check_the_work_are_process():
    text = "Fix the issue.\nCreate a script to reproduce the error. Write tests to check the correctness of the fix."
    assert rules_of(text) == [
        "Create a script to reproduce the error.",
        "Write tests to check the correctness of the fix.",
    ]
