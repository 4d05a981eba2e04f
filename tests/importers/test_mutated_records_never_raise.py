"""Property test: importers fed mutated real records never raise, and every record they cannot
use is counted with its file and line (hypothesis; small example counts to stay fast)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.importers import import_paths
from tests.conftest import TRANSCRIPTS
from tests.importers.test_codex_opencode_fixtures import codex_rollout

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "role", "content", "id", "message", "payload", "x"]), kids, max_size=3
        )
    ),
    max_leaves=8,
)

# Small real files, one per line-based format (codex has no real sample: its fixture is used).
JSONL = {
    "claude-code": "claude-code/moredip-session-share/4b2030ed-5563-49ea-b703-6a002f2d3cc8.jsonl",
    "openhands": "openhands/OpenHands-repo/resolver_mock_output.jsonl",
}
WHOLE = {
    "swe-agent": ("swe-agent/SWE-agent-repo/demo__function_calling_simple.traj", "history"),
    "openai": (
        "openai-chat/derived-from-SWE-agent-fc-trajs/demo__function_calling_simple.messages.json",
        None,
    ),
    "openhands": ("openhands/OpenHands-repo/runtime_trajs__basic_gui_mode.json", None),
    "inspect": (
        "inspect-ai/UKGovernmentBEIS-inspect_ai/2025-05-12T20-27-36-04-00_browser.json",
        "samples.0.messages",
    ),
}


def _lines(fmt, tmp_path) -> list[bytes]:
    if fmt == "codex":
        return codex_rollout(tmp_path).read_bytes().split(b"\n")
    if not TRANSCRIPTS.is_dir():
        pytest.skip("../shared/transcripts not present")
    return (TRANSCRIPTS / JSONL[fmt]).read_bytes().split(b"\n")


def _assert_clean(report):
    # An importer that raised is caught by iter_sessions and counted as "importer stopped": a bug.
    assert "importer stopped" not in report.problems, report.summary()


mutation = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0.0, 0.99)),
    st.tuples(
        st.just("bytes"), st.floats(0.0, 1.0), st.binary(min_size=1, max_size=4).map(lambda b: b"\xff" + b)
    ),
    st.tuples(st.just("json"), json_values),
    st.tuples(
        st.just("field"),
        st.sampled_from(["type", "message", "payload", "content", "call_id", "tool_use_id", "id", "history"]),
        json_values,
    ),
)


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "openhands"])
@SETTINGS
@given(data=st.data())
def test_mutated_jsonl_line(fmt, data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(fmt)
    lines = _lines(fmt, tmp)
    idx = data.draw(st.integers(0, len([ln for ln in lines if ln.strip()]) - 1))
    n = [i for i, ln in enumerate(lines) if ln.strip()][idx]
    line = lines[n]
    kind, *arg = data.draw(mutation)
    must_report = True
    if kind == "truncate":
        line = line[: max(1, int(len(line) * arg[0]))]
    elif kind == "bytes":
        at = int(len(line) * arg[0])
        line = line[:at] + arg[1] + line[at:]
    elif kind == "json":
        line = json.dumps(arg[0]).encode()
        must_report = (
            not isinstance(arg[0], dict)
            or arg[0].get("type") is None
            or not isinstance(arg[0].get("type"), str)
        )
    else:
        obj = json.loads(line)
        obj[arg[0]] = arg[1]
        line = json.dumps(obj).encode()
        must_report = False  # may still be usable; it must not crash
    lines[n] = line
    p = tmp / "in.jsonl"
    p.write_bytes(b"\n".join(lines))
    _, report = import_paths([p], fmt=fmt)
    _assert_clean(report)
    if must_report:
        # The mutated line (1-based n+1) is named in a counted problem or skip.
        assert report.issues_at(p, n + 1), (kind, report.summary())


@pytest.mark.parametrize("fmt", sorted(WHOLE))
@SETTINGS
@given(data=st.data())
def test_mutated_whole_file(fmt, data, tmp_path_factory):
    if not TRANSCRIPTS.is_dir():
        pytest.skip("../shared/transcripts not present")
    rel, key = WHOLE[fmt]
    raw = (TRANSCRIPTS / rel).read_bytes()
    tmp = tmp_path_factory.mktemp(fmt)
    p = tmp / ("in" + "".join((TRANSCRIPTS / rel).suffixes[-1:]))
    if data.draw(st.booleans()):
        p.write_bytes(raw[: data.draw(st.integers(1, len(raw) - 2))])
        sessions, report = import_paths([p], fmt=fmt)
        _assert_clean(report)
        assert sessions == [] and sum(report.problems.values()) == 1
        return
    doc = json.loads(raw)
    items = doc
    for k in (key or "").split(".") if key else []:
        items = items[int(k)] if k.isdigit() else items[k]
    i = data.draw(st.integers(0, len(items) - 1))
    value = data.draw(json_values)
    items[i] = value
    p.write_text(json.dumps(doc))
    _, report = import_paths([p], fmt=fmt)
    _assert_clean(report)
    if not isinstance(value, dict):
        assert report.problems, report.summary()


@SETTINGS
@given(
    at=st.floats(0.0, 1.0),
    junk=(st.text(max_size=40) | st.binary(max_size=8).map(lambda b: b.decode("latin-1"))).map(
        lambda t: t.replace("\n", " ")
    ),
)
def test_mutated_aider_line(at, junk, tmp_path_factory):
    if not TRANSCRIPTS.is_dir():
        pytest.skip("../shared/transcripts not present")
    src = (
        TRANSCRIPTS / "aider/Aider-AI-aider/sessions/aider-chat-history__session0325__2024-08-09T18-45-35.md"
    )
    lines = src.read_bytes().split(b"\n")
    n = int((len(lines) - 1) * at)
    lines[n] = junk.encode("utf-8", errors="surrogateescape") + b"\xff"
    p = tmp_path_factory.mktemp("aider") / "h.md"
    p.write_bytes(b"\n".join(lines))
    _, report = import_paths([p], fmt="aider")
    _assert_clean(report)
    assert report.issues_at(p, n + 1)  # the non-UTF-8 line is named
