"""The error classes heldout41's measurement showed (tests/fixtures/labels/README.md), each with a
positive and a negative case on a real-shaped sample (the importer's side of Bob's tools is in
tests/importers/test_roo_bob_cline.py)."""

from __future__ import annotations

from evalkit.contracts.session import Message, Text, ToolCall, ToolResult
from evalkit.facts import compute_facts
from tests.support.facts import session_of

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
