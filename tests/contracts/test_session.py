"""The canonical session model: round trips, validation errors, tool-pair invariant."""

from __future__ import annotations

import json

import pytest

from evalkit.contracts.session import (
    Compaction,
    Message,
    RecordError,
    Session,
    Source,
    Text,
    ToolCall,
    ToolResult,
    session_from_dict,
    session_to_dict,
    session_to_json,
    tool_pair_problems,
)


def _session() -> Session:
    return Session(
        "s1",
        Source("synthetic", "x.jsonl", "test"),
        [
            Message("m0", "user", [Text("Fix it. Never touch migrations/.")]),
            Message("m1", "assistant", [Text("ok"), ToolCall("c1", "Bash", {"command": "pytest"})]),
            Message("m2", "tool", [ToolResult("c1", "1 failed", is_error=True, exit_code=1)]),
            Message("m3", "user", [Compaction("summary text", 1000, 200, "auto")]),
        ],
    )


def test_round_trip_is_exact():
    s = _session()
    line = session_to_json(s)
    back = session_from_dict(json.loads(line))
    assert session_to_json(back) == line
    assert back.messages[2].blocks[0] == ToolResult("c1", "1 failed", True, 1)


def test_u2028_stays_escaped_on_one_line():
    s = Session("s", Source("x"), [Message("m", "user", [Text("a\u2028b\nc")])])
    line = session_to_json(s)
    assert "\u2028" not in line and "\n" not in line
    assert session_from_dict(json.loads(line)).messages[0].blocks[0].text == "a\u2028b\nc"


@pytest.mark.parametrize(
    "mutate, field, reason",
    [
        (lambda d: d["messages"][0].update(role="robot"), "messages[0].role", "unknown role 'robot'"),
        (
            lambda d: d["messages"][2]["blocks"][0].update(exit_code="1"),
            "messages[2].blocks[0].exit_code",
            "expected int, got str",
        ),
        (
            lambda d: d["messages"][2]["blocks"][0].update(exit_code=True),
            "messages[2].blocks[0].exit_code",
            "expected integer, got True",
        ),
        (lambda d: d.pop("id"), "id", "missing"),
        (
            lambda d: d["messages"][1]["blocks"][1].update(type="video"),
            "messages[1].blocks[1].type",
            "unknown block type 'video'",
        ),
        (lambda d: d.update(messages={}), "messages", "expected list, got dict"),
        (lambda d: d.update(schema="other/9"), "schema", "unsupported schema"),
    ],
)
def test_validation_names_the_field(mutate, field, reason):
    d = session_to_dict(_session())
    mutate(d)
    with pytest.raises(RecordError) as e:
        session_from_dict(d)
    assert e.value.field == field
    assert reason in e.value.reason


def test_genuine_user_excludes_synthetic_text_and_tool_results():
    assert Message("a", "user", [Text("please fix")]).is_genuine_user()
    assert not Message("b", "user", [Text("<system-reminder>", synthetic=True)]).is_genuine_user()
    assert not Message("c", "user", [ToolResult("c1", "out")]).is_genuine_user()
    assert not Message("d", "tool", [Text("x")]).is_genuine_user()


def test_tool_pairs_valid_session():
    assert tool_pair_problems(_session().messages) == []


def _broken_pairs() -> list[Message]:
    """An unanswered call (c2), a duplicate result (c1) and an orphan result (c9)."""
    return [
        Message("a", "assistant", [ToolCall("c1", "Bash", {}), ToolCall("c2", "Bash", {})]),
        Message("b", "tool", [ToolResult("c1", "x")]),
        Message("c", "tool", [ToolResult("c1", "again")]),
        Message("d", "assistant", [Text("next turn")]),
        Message("e", "tool", [ToolResult("c9", "orphan")]),
    ]


def test_tool_pair_problems_are_named():
    msgs = _broken_pairs()
    got = {(p.call_id, p.problem) for p in tool_pair_problems(msgs)}
    assert got == {("c2", "unanswered_call"), ("c1", "duplicate_result"), ("c9", "orphan_result")}


def test_tool_pair_problems_with_given_ids_are_the_same():
    from evalkit.contracts.session import pair_ids

    msgs = _broken_pairs()
    memo = {m.id: pair_ids(m) for m in msgs}
    assert memo["a"] == (("c1", "c2"), ())
    assert tool_pair_problems(msgs, lambda m: memo[m.id]) == tool_pair_problems(msgs)
    assert tool_pair_problems(msgs[:2], lambda m: memo[m.id]) == tool_pair_problems(msgs[:2])
