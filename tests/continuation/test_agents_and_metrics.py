"""Continuation runs on hand-built sessions where every answer and metric is known."""

from __future__ import annotations

import json
import math

import pytest

from evalkit.continuation import (
    UNAVAILABLE,
    ContinuationInput,
    ReplayEnvironment,
    SessionRecord,
    continuation_metrics,
    make_agent,
)
from evalkit.continuation.agents.heuristic import heuristic_agent, knows
from evalkit.contracts.config import ContinuationConfig, ModelConfig
from evalkit.contracts.event import Event
from evalkit.contracts.session import Message, Session, Source, Text, ToolCall, ToolResult, message_to_dict
from evalkit.models import ChatResponse
from evalkit.testing.serverlog import read_log

BUILD_ERR = "src/x.ts:1:1 - error TS2339: Property 'a' does not exist\n"
AT = 11  # index of the last recorded message in view when compaction fired


def _session(
    edit_after_failure: bool = False, future: tuple = ("build", "read"), edit_path: str = "src/x.ts"
) -> Session:
    m: list[Message] = []

    def add(role, *blocks):
        m.append(Message(f"m{len(m):02d}", role, list(blocks)))

    def tool(cid, name, args, output, exit_code=None, is_error=False):
        add("assistant", ToolCall(cid, name, args))
        add("tool", ToolResult(cid, output, is_error, exit_code))

    add("system", Text("You are a coding agent."))
    add("user", Text("Fix the build."))
    tool("c1", "Bash", {"command": "cd /repo && npm run build"}, BUILD_ERR, 2, True)  # m02-m03
    tool("c2", "Read", {"file_path": "src/a.py"}, "def a():\n    return 1\n")  # m04-m05
    tool("c3", "Bash", {"command": "git status"}, "M src/a.py (old)\n")  # m06-m07
    if edit_after_failure:
        tool("c4", "Edit", {"file_path": edit_path, "old_string": "a", "new_string": "b"}, "ok")
    else:
        tool("c4", "Bash", {"command": "git status"}, "M src/a.py (latest)\n")  # m08-m09
    tool("c5", "Bash", {"command": "pytest -q"}, "==== 3 passed in 0.1s ====\n", 0)  # m10-m11
    assert len(m) - 1 == AT
    for k, what in enumerate(future):
        if what == "build":
            tool(f"f{k}", "Bash", {"command": "npm   run build"}, BUILD_ERR, 2, True)
        elif what == "read":
            tool(f"f{k}", "Read", {"file_path": "./src/a.py"}, "def a():\n    return 1\n")
        elif what == "ls":
            tool(f"f{k}", "Bash", {"command": "ls src"}, "a.py\nx.ts\n", 0)
    add("assistant", Text("Done."))
    return Session("s1", Source("test"), m)


def _event(session: Session, summary: str, keep: tuple[str, ...] = (), masked: tuple[str, ...] = ()) -> Event:
    made = Message("evalkit:r1:summary", "user", [Text(summary)])
    ctx = [{"ref": "m00"}, {"message": message_to_dict(made)}] + [{"ref": k} for k in keep]
    ctx += [{"ref": k, "mask": "outputs"} for k in masked]
    return Event(
        "baseline", session.id, 0, 1, "tokens", AT, 1000, 100, 2000, None, [], summary, new_context=ctx
    )


def _inp(session: Session, event: Event, n: int = 30) -> ContinuationInput:
    rec = SessionRecord.build(session)
    return ContinuationInput.from_event(event, rec, {m.id: m for m in session.messages}, n)


def _metrics(inp: ContinuationInput, transcript) -> dict[str, float]:
    return {k: v for k, v, _ in continuation_metrics(inp.record, inp.at, transcript, inp.max_calls)}


# --------------------------------------------------------------------------- environment


def test_environment_answers_matching_commands_with_recorded_output():
    env = ReplayEnvironment(SessionRecord.build(_session()), AT)
    # `cd X &&` prefix, extra whitespace and quoting differ from the recorded `cd /repo && npm run build`.
    for cmd in (
        "npm run build",
        "cd /other && npm  run  build",
        "npm run 'build'",
        'cd "/a b"; npm run build',
    ):
        a = env.answer(ToolCall("x", "Bash", {"command": cmd}))
        assert (a.output, a.failed, a.exit_code, a.source) == (BUILD_ERR, True, 2, "command")
    # Latest recorded run before the point wins over earlier ones...
    assert env.answer(ToolCall("x", "bash", {"command": "git  status"})).output == "M src/a.py (latest)\n"
    # ...and a command only recorded after the point gets its first recorded run.
    env_ls = ReplayEnvironment(SessionRecord.build(_session(future=("ls",))), AT)
    a = env_ls.answer(ToolCall("x", "Bash", {"command": "ls  src"}))
    assert (a.output, a.failed, a.recorded_index) == ("a.py\nx.ts\n", False, AT + 2)
    assert env.answer(ToolCall("x", "Bash", {"command": "pytest '-q'"})).output.startswith("==== 3 passed")


def test_environment_files_edits_and_unavailable():
    env = ReplayEnvironment(SessionRecord.build(_session()), AT)
    assert env.answer(ToolCall("r", "Read", {"file_path": "./src/a.py"})).output == "def a():\n    return 1\n"
    # A plain shell read of a file the recording shows is answered with its content.
    assert env.answer(ToolCall("r", "Bash", {"command": "cat src/a.py"})).source == "file"
    edit = env.answer(ToolCall("e", "Edit", {"file_path": "src/b.py", "old_string": "x", "new_string": "y"}))
    assert edit.source == "edit" and edit.answered and not edit.failed and "src/b.py" in edit.output
    for call in (
        ToolCall("u1", "Bash", {"command": "make deploy"}),
        ToolCall("u2", "Read", {"file_path": "src/never_read.py"}),
        ToolCall("u3", "WebFetch", {"url": "https://example.com"}),
    ):
        a = env.answer(call)
        assert (a.output, a.answered, a.failed, a.is_error) == (UNAVAILABLE, False, False, True)
    assert env.unanswered == 3 and env.unanswerable_share() == pytest.approx(3 / 6)
    assert [src for _, src in env.log][-3:] == ["unavailable"] * 3


# --------------------------------------------------------------------------- heuristic agent


def test_heuristic_refails_only_when_the_context_lost_the_failure():
    s = _session(future=("ls",))  # the recording never re-runs the build: only rule 1 can re-fail
    lost = _inp(s, _event(s, "## Progress\n- working on the build"))
    shown = _inp(s, _event(s, "## Errors\n- " + BUILD_ERR.strip()))
    kept = _inp(s, _event(s, "## Progress\n- ok", keep=("m02", "m03")))
    t_lost = heuristic_agent(lost, ReplayEnvironment(lost.record, AT))
    assert [st.op.command for st in t_lost.steps] == ["npm run build", "ls src"]
    got = _metrics(lost, t_lost)
    assert got["refail_30"] == 1.0 and got["first_action_match"] == 0.0 and got["calls_used"] == 2
    for inp in (shown, kept):
        got = _metrics(inp, heuristic_agent(inp, ReplayEnvironment(inp.record, AT)))
        assert got["refail_30"] == 0.0 and got["first_action_match"] == 1.0 and got["stops"] == 1.0


def test_heuristic_recorded_retry_is_skipped_when_shown_and_change_since_is_not_a_refail():
    s = _session(future=("build", "read"))
    shown = _inp(s, _event(s, "- " + BUILD_ERR.strip() + "\n- def a():\n    return 1"))
    got = _metrics(shown, heuristic_agent(shown, ReplayEnvironment(shown.record, AT)))
    assert got["refail_30"] == 0.0 and got["redo_30"] == 0.0 and got["calls_used"] == 0
    lost = _inp(s, _event(s, "(nothing useful)"))
    got = _metrics(lost, heuristic_agent(lost, ReplayEnvironment(lost.record, AT)))
    assert got["refail_30"] == 1.0 and got["redo_30"] == 1.0  # re-ran the build, re-read src/a.py
    # With an edit between the failure and the point, re-running the build is verification.
    s2 = _session(edit_after_failure=True, future=("build",))
    lost2 = _inp(s2, _event(s2, "(nothing useful)"))
    t = heuristic_agent(lost2, ReplayEnvironment(lost2.record, AT))
    assert [st.op.command for st in t.steps] == ["npm run build"]  # only the recorded re-run
    assert _metrics(lost2, t)["refail_30"] == 0.0


def test_the_heuristic_has_its_own_stale_rule_not_the_metrics():
    """The heuristic treats any edit as making a shown failure stale (it re-runs the recorded
    command), while refail_N counts that re-run when the edit touched no file the failure names:
    the agent does not skip exactly what the metric counts. Without an edit, a shown failure is
    skipped and a lost one retried."""
    s = _session(edit_after_failure=True, future=("build",), edit_path="src/a.py")
    for summary in ("## Blocked\n- `npm run build`: " + BUILD_ERR.strip(), "(nothing useful)"):
        inp = _inp(s, _event(s, summary))
        t = heuristic_agent(inp, ReplayEnvironment(inp.record, AT))
        assert [st.op.command for st in t.steps] == ["npm run build"]  # the recorded re-run only
        assert _metrics(inp, t)["refail_30"] == 1.0
    s = _session(future=("build",))
    shown = _inp(s, _event(s, "## Blocked\n- `npm run build`: " + BUILD_ERR.strip()))
    assert heuristic_agent(shown, ReplayEnvironment(shown.record, AT)).steps == []
    lost = _inp(s, _event(s, "(nothing useful)"))
    t = heuristic_agent(lost, ReplayEnvironment(lost.record, AT))
    assert [st.op.command for st in t.steps] == [
        "npm run build",
        "npm run build",
    ]  # retry, then the recorded one
    assert _metrics(lost, t)["refail_30"] == 1.0


def test_a_masked_output_does_not_show_the_failure():
    """Observation masking keeps the call but replaces the output: the failure is not in view."""
    s = _session(future=("ls",))
    masked = _inp(s, _event(s, "(no summary)", keep=("m02",), masked=("m03",)))
    assert not knows(masked, masked.record.open_failures(AT)[0])
    got = _metrics(masked, heuristic_agent(masked, ReplayEnvironment(masked.record, AT)))
    assert got["refail_30"] == 1.0
    kept = _inp(s, _event(s, "(no summary)", keep=("m02", "m03")))
    assert knows(kept, kept.record.open_failures(AT)[0])


def test_budget_cuts_the_plan_and_stops_is_not_scored_past_it():
    s = _session(future=("ls",) * 5)
    inp = _inp(s, _event(s, "(nothing)"), n=3)
    t = heuristic_agent(inp, ReplayEnvironment(inp.record, AT))
    assert len(t.steps) == 3 and not t.stopped
    got = _metrics(inp, t)
    assert "stops" not in got and "refail_3" in got and got["calls_used"] == 3


# --------------------------------------------------------------------------- openai agent (scripted client)


class ScriptedClient:
    """Our own model seam (client(ChatRequest) -> ChatResponse), scripted turn by turn."""

    def __init__(self, turns: list[list[dict]]):
        self.turns = turns
        self.requests = []

    def __call__(self, request):
        self.requests.append(request)
        k = len(self.requests) - 1
        calls = self.turns[k] if k < len(self.turns) else []
        return ChatResponse(text="", backend="scripted", model=request.model, tool_calls=calls)


def _call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _run_openai(turns, s=None):
    s = s or _session(future=("ls",))
    inp = _inp(s, _event(s, "## Goal\nFix the build."))
    client = ScriptedClient(turns)
    agent = make_agent("openai", ContinuationConfig(), ModelConfig(backend="scripted", model="m1"), client=client)
    t = agent(inp, ReplayEnvironment(inp.record, AT))
    return inp, t, client


def test_openai_agent_that_reruns_the_failed_command_refails():
    inp, t, client = _run_openai([[_call("a1", "Bash", {"command": "npm run build"})]])
    got = _metrics(inp, t)
    assert got["refail_30"] == 1.0 and t.stopped and got["calls_used"] == 1
    first = client.requests[0]
    assert first.purpose == "agent" and first.model == "m1"
    # Session names where the recording used them (Bash, Read), standard names otherwise.
    assert [tl["function"]["name"] for tl in first.tools] == ["Bash", "Read", "edit", "write"]
    assert first.messages[-1]["role"] == "user" and "Carry on" in first.messages[-1]["content"]
    # The second request carries the environment's recorded answer back to the model.
    assert client.requests[1].messages[-1] == {"role": "tool", "tool_call_id": "a1", "content": BUILD_ERR}


def test_openai_agent_that_does_not_rerun_it_does_not_refail():
    inp, t, _ = _run_openai(
        [
            [_call("a1", "Edit", {"file_path": "src/x.ts", "old_string": "a", "new_string": "b"})],
            [_call("a2", "Bash", {"command": "npm run build"})],  # after a change: not a re-fail
            [{"id": "a3", "name": "Bash", "arguments": {"command": "ls src"}}],
        ]
    )
    got = _metrics(inp, t)
    assert got["refail_30"] == 0.0 and got["first_action_match"] == 0.0 and got["calls_used"] == 3
    assert got["unanswerable_share"] == 0.0 and got["stops"] == 1.0


def test_openai_agent_budget_and_errors():
    inp, t, _ = _run_openai([[_call(f"a{k}", "Bash", {"command": "make x"}) for k in range(40)]])
    assert len(t.steps) == 30 and not t.stopped and _metrics(inp, t)["unanswerable_share"] == 1.0

    def failing(request):
        return ChatResponse(text=None, backend="scripted", model="m1", error="HTTP 500")

    s = _session()
    inp = _inp(s, _event(s, "x"))
    t = make_agent("openai", ContinuationConfig(), ModelConfig(), client=failing)(inp, ReplayEnvironment(inp.record, AT))
    rows = continuation_metrics(inp.record, AT, t, 30)
    assert rows and all(math.isnan(v) and "HTTP 500" in e for _, v, e in rows)


# --------------------------------------------------------------------------- observational baseline


def test_observational_on_real_shaped_compactions():
    """Claude Code (compact_boundary + isCompactSummary) and Codex (`compacted`) compactions, canonical form."""
    from evalkit.continuation import observed_metrics
    from evalkit.corpus import read_sessions
    from tests.conftest import FIXTURES

    got = {
        s.id: {(k, m): v for k, m, v in observed_metrics(s)}
        for s in read_sessions(FIXTURES / "continuation" / "observed_compactions.jsonl")
    }
    # Claude Code: the build re-run after the compaction fails again with no change since, the
    # file is re-read unchanged; the later build after the edit is not counted.
    assert got["cc-compacted"] == {(0, "refail_30"): 1.0, (0, "redo_30"): 1.0, (0, "calls_used"): 4.0}
    # Codex: the failing tests were followed by a patch before the compaction (a change), so the
    # re-run is not a re-fail; the window stops at the second compaction. After the second one,
    # `cat  src/parser.py` re-reads a file last read before it, unchanged: a redo.
    assert got["codex-compacted"] == {
        (0, "refail_30"): 0.0,
        (0, "redo_30"): 0.0,
        (0, "calls_used"): 1.0,
        (1, "refail_30"): 0.0,
        (1, "redo_30"): 1.0,
        (1, "calls_used"): 1.0,
    }


# --------------------------------------------------------------------------- openai agent over real HTTP

# Scripts for the fake OpenAI-compatible server: the first rule whose `match` is in the
# conversation answers. Both agents stop once the build's error (TS2339) has come back.
RERUNS = [
    {"match": "TS2339", "reply": "The build still fails; stopping here."},
    {"match": "Fix the build", "tool_calls": [{"name": "Bash", "arguments": {"command": "npm run build"}}]},
]
FIXES_FIRST = [
    {"match": "TS2339", "reply": "Stopping here."},
    {
        "match": "recorded (replay",
        "tool_calls": [{"name": "Bash", "arguments": {"command": "npm run build"}}],
    },
    {
        "match": "Fix the build",
        "tool_calls": [
            {"name": "edit", "arguments": {"file_path": "src/x.ts", "old_string": "a", "new_string": "b"}}
        ],
    },
]


@pytest.mark.parametrize(("script", "refail", "calls"), [(RERUNS, 1.0, 1), (FIXES_FIRST, 0.0, 2)])
def test_openai_agent_over_the_fake_server(fake_server, tmp_path, monkeypatch, script, refail, calls):
    """The `openai` agent through the real SDK and HTTP: a model that re-runs the failed build
    re-fails (refail_30 = 1); one that edits the file the error names first does not (0)."""
    from evalkit.testing.faults import Rule

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000000000")
    srv = fake_server(script=[Rule(**r) for r in script])
    s = _session(future=("ls",))
    inp = _inp(s, _event(s, "## Goal\nFix the build."))
    model = {
        "backend": "openai",
        "model": "fake-agent",
        "base_url": srv.url,
        "cache": "off",
        "max_retries": 0,
    }
    agent = make_agent("openai", ContinuationConfig(), ModelConfig(**model), run_dir=tmp_path)
    t = agent(inp, ReplayEnvironment(inp.record, AT))
    got = _metrics(inp, t)
    assert got["refail_30"] == refail and got["calls_used"] == calls and t.stopped
    posts = [e for e in read_log(srv.log_path) if e["method"] == "POST"]
    assert len(posts) == calls + 1  # one request per tool call, and the one that stopped


def test_first_action_match_never_scores_more_information_worse():
    """The recorded next step re-reads an unchanged file: an agent whose context shows the file
    skips it and starts on the step after; both first actions match (issue #16: the old
    definition scored the better-informed agent 0)."""
    s = _session(future=("read", "ls"))
    blind = _inp(s, _event(s, "(nothing)", keep=("m02", "m03")))  # the build failure, not the read
    informed = _inp(s, _event(s, "(nothing)", keep=("m02", "m03", "m04", "m05")))
    t_blind = heuristic_agent(blind, ReplayEnvironment(blind.record, AT))
    t_informed = heuristic_agent(informed, ReplayEnvironment(informed.record, AT))
    assert [st.op.kind for st in t_blind.steps][:1] == ["read"]
    assert [st.op.command for st in t_informed.steps] == ["ls src"]
    assert _metrics(blind, t_blind)["first_action_match"] == 1.0
    assert _metrics(informed, t_informed)["first_action_match"] == 1.0
    # A first action that is neither the next step nor reachable by skipping repeats still fails.
    s2 = _session(future=("ls", "read"))
    inp = _inp(s2, _event(s2, "(nothing)", keep=("m02", "m03", "m04", "m05")))
    t = heuristic_agent(inp, ReplayEnvironment(inp.record, AT))
    assert [st.op.command for st in t.steps][:1] == ["ls src"]
    assert _metrics(inp, t)["first_action_match"] == 1.0
    wrong = type(t)([st for st in t.steps if st.op.kind == "read"], stopped=True)
    assert _metrics(inp, wrong)["first_action_match"] == 0.0
