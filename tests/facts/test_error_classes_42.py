"""The error classes heldout42's measurement showed (tests/fixtures/labels/README.md), each with a
positive and a negative case on a real-shaped sample: the error under Cline's/Roo's/Bob's "tool
execution failed" header, npm's own error block, a library's generic message, Windows paths, and
symbols of an aider whole-file listing the user interrupted."""

from __future__ import annotations

from evalkit.contracts.session import Message, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from evalkit.facts.failures import attempt_key
from evalkit.facts.identifiers import error_string
from tests.support.facts import aider_session, ids_of, session_of

# --------------------------------------------------------------------------- error strings

_TOOL_FAILED = "The tool execution failed with the following error:\n<error>\n{}\n</error>"


def test_the_error_under_the_tool_execution_failed_header_is_the_identifier():
    assert error_string(_TOOL_FAILED.format("Invalid mode: advance"), refused=True) == "Invalid mode: advance"


def test_a_generic_message_under_the_header_is_still_no_identifier():
    # The header is never the error; a generic refusal under it names nothing of the call.
    out = _TOOL_FAILED.format("Parameter `path` is required for command: read_file.")
    assert error_string(out, refused=True) == ""


_NPM_404 = """added 7 packages, and audited 116 packages in 2s

Run `npm audit` for details.
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@types%2fsimple-git - Not found
npm error 404
npm error 404  The requested resource '@types/simple-git@*' could not be found or you do not have permission to access it.
npm error 404
npm error A complete log of this run can be found in: /home/u/.npm/_logs/2026-05-16T09_00_43_812Z-debug-0.log"""


def test_npm_failing_by_itself_gives_its_message_line():
    got = error_string(_NPM_404, command="npm install --save-dev @types/simple-git")
    assert got == "npm error 404 Not Found - GET https://registry.npmjs.org/@types%2fsimple-git - Not found"


def test_a_script_failure_under_npm_elifecycle_keeps_the_scripts_own_error():
    out = (
        "> app@1.0.0 test\n> jest\n\nTypeError: Cannot read properties of undefined (reading 'id')\n"
        "npm ERR! code ELIFECYCLE\nnpm ERR! errno 1\nnpm ERR! app@1.0.0 test: `jest`\nnpm ERR! Exit status 1\n"
        "npm ERR! A complete log of this run can be found in:\nnpm ERR!     /home/u/.npm/_logs/debug.log"
    )
    assert (
        error_string(out, command="npm test")
        == "TypeError: Cannot read properties of undefined (reading 'id')"
    )


_ROS_LOG = "\n".join(
    [
        "stdin is not a terminal device. Keyboard handling disabled.[INFO] [17.6] [rosbag2_storage]: Opened database",
        "[INFO] [17.6] [rosbag2_player]: Set rate to 100",
        "[INFO] [17.6] [rosbag2_player]: Adding keyboard callbacks.",
        "WARNING: topic [/diagnostics] does not appear to be published yet",
        "{}",
    ]
)
_ROS_CMD = "cd logs/fault_scenario_1 && ros2 bag play . --topics /diagnostics --rate 100 & sleep 2 && ros2 topic echo /diagnostics --once"


def test_a_librarys_generic_last_line_is_no_identifier():
    assert (
        error_string(_ROS_LOG.format("Could not determine the type for the passed topic"), command=_ROS_CMD)
        == ""
    )


def test_a_last_line_naming_the_calls_argument_is_the_identifier():
    line = "Could not determine the type for the passed topic /diagnostics"
    assert error_string(_ROS_LOG.format(line), command=_ROS_CMD) == line


# --------------------------------------------------------------------------- files


def _writes(*paths: str):
    msgs = [Message("m0", "user", [Text("Write the seed script.")])]
    for k, path in enumerate(paths):
        call = ToolCall(f"c{k}", "write_to_file", {"path": path, "content": "x = 1\n"})
        msgs += [Message(f"a{k}", "assistant", [call]), Message(f"t{k}", "tool", [ToolResult(f"c{k}", "ok")])]
    return compute_facts(session_of(*msgs))


def test_a_windows_path_and_its_forward_slash_spelling_are_one_file():
    f = _writes("scripts/seed_pooja_only.ts", "scripts\\seed_pooja_only.ts")
    assert {x.path for x in f.files_modified} == {"scripts/seed_pooja_only.ts"}


def test_a_shell_escaped_space_is_not_a_windows_separator():
    f = _writes("my\\ notes.txt")
    assert {x.path for x in f.files_modified} == {"my\\ notes.txt"}


# --------------------------------------------------------------------------- interrupted whole-file listing

_INTERRUPTED = """# aider chat started at 2026-05-04 01:24:27

> Model: openai/deepseek-v4-pro with whole edit format

#### make the greeting more casual

Here's the updated file:

launcher.py
```
import sys

class Colors:
    HEADER = "\\033[38;5;178m"

def bootstrap() -> Path:
    return Path(".")

class LauncherUI:
    @classmethod
    def banner(cls):
        print("Hey there! see https://example.org/docs")
    COMMANDS = {
        "ai", "cli", "api


#### /undo
> The last commit was not made by aider in this chat session.
"""


def _aider(tmp_path, text: str):
    return compute_facts(aider_session(tmp_path, text))


def test_an_interrupted_whole_file_listing_gives_its_definition_lines(tmp_path):
    f = _aider(tmp_path, _INTERRUPTED)
    assert ids_of(f, "symbol") == {"Colors", "bootstrap", "LauncherUI", "banner"}
    assert ids_of(f, "url") == set()  # the listing is file content, closed or not


def test_an_unfenced_code_sample_in_prose_is_still_no_listing(tmp_path):
    text = _INTERRUPTED.replace("launcher.py\n```", "For example:\n```")
    f = _aider(tmp_path, text)
    assert ids_of(f, "symbol") == set()


# --------------------------------------------------------------------------- the same attempt


def _shell(cmd: str) -> ToolCall:
    return ToolCall("c", "execute_command", {"command": cmd})


def test_a_chain_re_run_with_semicolons_is_the_same_attempt():
    # PowerShell 5 refuses "&&"; the agent re-runs the same commands joined with ";".
    a = attempt_key(_shell("git checkout staging && git pull origin staging && git checkout -b feat/x"))
    assert a == attempt_key(_shell("git checkout staging; git pull origin staging; git checkout -b feat/x"))


def test_a_chain_of_other_commands_is_another_attempt():
    a = attempt_key(_shell("git checkout staging && git pull origin staging"))
    assert a != attempt_key(_shell("git checkout main; git pull origin main"))
