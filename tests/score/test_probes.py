"""Deterministic probes on constructed events whose right answers are known, adversarial ones included."""

from __future__ import annotations

import math

import pytest

from evalkit.contracts.event import Invariants
from evalkit.facts import TallyFact, compute_facts
from evalkit.replay.prompt import TEMPLATE as _HEADINGS
from evalkit.score import PROBES, SessionView, Suite, score_events
from evalkit.score.tallymatch import found_in, mentions
from tests.support.probe_sessions import Builder, event, run_probe

TEMPLATE = "\n".join(_HEADINGS)


def pytest_out(passed: int, failed: int, pad: int = 0) -> str:
    head = "============================= test session starts ==============================\n"
    warn = "tests/test_x.py::test_a\n  DeprecationWarning: old api\n" * (pad // 50 + 1) if pad else ""
    return head + "collected items\n\n" + warn + f"===== {failed} failed, {passed} passed in 0.51s =====\n"


def tally_session(latest_pad: int = 0):
    b = Builder()
    b.user("Fix the parser.")
    b.tool("Bash", {"command": "pytest -q"}, pytest_out(10, 5), exit_code=1)  # old tally: 10/5
    b.tool("Bash", {"command": "pytest -q"}, pytest_out(12, 3, latest_pad), exit_code=1)  # latest: 12/3
    b.user("ok, continue")  # 7
    b.tool("Read", {"file_path": "src/a.py"}, "x = 1\n")  # 8, 9
    b.user("go on")  # 10
    return b.session()


# --------------------------------------------------------------------------- tally_present


@pytest.mark.parametrize(
    ("summary", "present"),
    [
        ("## Progress\n- pytest: 12 passed, 3 failed", 1.0),  # reworded, no rules, runner prefix
        ("## Progress\n- 3 failed, 12 passed", 1.0),  # order does not matter
        ("Tests:\n- 12 passed,\n- 3 failed\n", 1.0),  # split across lines
        ("## Progress\n- 12 passed", 0.0),  # not count-exact
        ("## Progress\n- 10 passed, 5 failed", 0.0),  # quotes the OLD tally
        ("earlier 5 failed; now 12 passed, 3 failed", 1.0),  # old and new side by side
        ("12 passed, 3 failed, 1 skipped", 0.0),  # a skip count that disagrees
        ("ran: 12 passed, 4 failed", 0.0),
        ("", 0.0),
    ],
)
def test_tally_present_count_exact_and_layout_free(summary, present):
    s = tally_session()
    ev = event(s, at=10, keep_from=8, summary=summary)  # both test outputs left the view
    got = run_probe("tally_present", ev, s)
    assert got["tally_present"] == present
    assert got["tally_in_summary"] == present


def test_tally_in_kept_tail_counts_for_context_not_summary():
    s = tally_session()
    ev = event(s, at=10, keep_from=4, summary="## Progress\n- nothing")  # latest test output kept
    got = run_probe("tally_present", ev, s)
    assert got == {"tally_present": 1.0, "tally_in_summary": 0.0}  # not left view: no subset rows


def test_tally_left_view_subset_and_early_share():
    late = tally_session(latest_pad=2_500)  # tally past char 2,000
    ev = event(late, at=10, keep_from=8, summary="- 12 passed, 3 failed")
    got = run_probe("tally_present", ev, late)
    assert got["tally_present_left_view"] == 1.0 and got["tally_left_view_early"] == 0.0
    ev = event(late, at=10, keep_from=8, summary="- 10 passed, 5 failed")
    assert run_probe("tally_present", ev, late)["tally_present_left_view"] == 0.0
    short = tally_session()  # output < 2,000 chars: not a "long" output, not in the subset
    assert "tally_present_left_view" not in run_probe("tally_present", event(short, 10, 8, "x"), short)


def test_no_tally_before_the_compaction_point_gives_no_rows():
    s = tally_session()
    assert run_probe("tally_present", event(s, at=2, keep_from=2, summary="12 passed, 3 failed"), s) == {}


def _fact(p, f, e=0, sk=0) -> TallyFact:
    return TallyFact(0, "c", "pytest", "x", p, f, e, sk, 0, "", 0)


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("Ran 15 tests in 0.1s\n\nFAILED (failures=3, errors=1)", _fact(11, 3, 1)),
        ("Tests:       1 failed, 1 skipped, 4 passed, 6 total", _fact(4, 1, 0, 1)),
        ("Tests run: 5, Failures: 1, Errors: 0, Skipped: 1", _fact(3, 1, 0, 1)),
        ("80% tests passed, 1 tests failed out of 5", _fact(4, 1)),
        ("test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out", _fact(3, 1)),
        ("  4 passing (12ms)\n  2 pending\n  1 failing", _fact(4, 1, 0, 2)),
        ("      Tests  1 failed | 4 passed (5)", _fact(4, 1)),
        ("OK (10 tests, 20 assertions)", _fact(10, 0)),
    ],
)
def test_runner_formats_match_their_own_counts(text, fact):
    assert found_in(mentions(text), fact)
    wrong = _fact(fact.passed + 1, fact.failed, fact.errors, fact.skipped)
    assert not found_in(mentions(text), wrong)


def test_all_passed_is_not_satisfied_by_a_run_with_failures():
    assert not found_in(mentions("12 passed, 3 failed"), _fact(12, 0))
    assert found_in(mentions("12 passed"), _fact(12, 0))


# --------------------------------------------------------------------------- constraints, failures, files


def constraint_session():
    b = Builder()
    b.user("Fix the parser.\nNever modify anything under migrations/; those files are generated.")
    b.user("Use httpx not requests for any new HTTP code.")
    b.tool(
        "Bash", {"command": "npm run build"}, "src/a.ts:3:7 - error TS2339: Property 'x' does not exist.\n", 2
    )
    b.tool("Edit", {"file_path": "src/parser.py", "old_string": "a", "new_string": "b"}, "updated")
    b.tool("Write", {"file_path": "tests/test_parser.py", "content": "x"}, "created")
    b.tool("Bash", {"command": "make docs"}, "docs/x.rst:1: ERROR: Unknown target name\n", 2)
    b.tool("Bash", {"command": "make docs"}, "ok\n", 0)  # fixed at 14
    b.user("go on")  # 13
    return b.session()


@pytest.mark.parametrize(
    ("summary", "verbatim", "normalized"),
    [
        (
            "- Never modify anything under migrations/; those files are generated.\n"
            "- Use httpx not requests for any new HTTP code.",
            1.0,
            1.0,
        ),
        ("- NEVER modify anything under migrations/ -- those files are generated!", 0.0, 0.5),
        ("- Don't touch the migrations folder (generated).\n- Prefer httpx over requests.", 0.0, 0.0),
    ],
)
def test_constraints_verbatim_normalized_and_paraphrased(summary, verbatim, normalized):
    s = constraint_session()
    got = run_probe("constraints_kept", event(s, at=13, keep_from=13, summary=summary), s)
    assert got == {"constraints_kept": verbatim, "constraints_kept_normalized": normalized}


def test_constraints_stated_after_the_compaction_point_do_not_count():
    s = constraint_session()
    got = run_probe("constraints_kept", event(s, at=1, keep_from=1, summary="nothing"), s)
    assert got == {"constraints_kept": 1.0, "constraints_kept_normalized": 1.0}  # its message is kept


def test_failures_known_only_counts_unfixed_failures():
    s = constraint_session()
    ev = event(
        s,
        at=13,
        keep_from=13,
        summary="- npm run build: src/a.ts:3:7 - error TS2339: Property 'x' does not exist.",
    )
    assert run_probe("failures_known", ev, s) == {"failures_known": 1.0}  # make docs was fixed at 12
    assert run_probe("failures_known", event(s, 13, 13, "- the build fails"), s) == {"failures_known": 0.0}
    ev = event(s, at=10, keep_from=11, summary="- npm run build: error TS2339")  # make docs still open
    assert run_probe("failures_known", ev, s) == {"failures_known": 0.0}


def test_files_known_is_the_share_of_modified_paths_named():
    s = constraint_session()
    got = run_probe("files_known", event(s, 13, 13, "Edited src/parser.py."), s)
    assert got == {"files_known": 0.5}


# --------------------------------------------------------------------------- size, growth, redundancy


def test_summary_size_and_compression():
    s = constraint_session()
    got = run_probe("summary_size", event(s, 13, 13, "one two three four five"), s)
    assert got == {"summary_words": 5.0, "summary_tokens": math.ceil(23 / 4)}
    assert run_probe("compression", event(s, 13, 13, "x", tokens=(1000, 250)), s) == {"compression": 0.25}


def test_growth_stacking_and_session_level_ratio():
    s = constraint_session()
    first = "## Goal\n- fix the parser and keep every constraint the user stated in the first message" * 2
    e0 = event(s, 5, 5, first, n=0)
    e1 = event(s, 10, 10, "## Goal\n- short", n=1)
    e2 = event(s, 13, 13, "## Previous\n" + first + "\n## New\n- more", n=2)  # re-embeds round 1
    assert run_probe("growth", e0, s, later=[e1, e2]) == {"summary_growth": 1.0}
    g1 = run_probe("growth", e1, s, previous=[e0], later=[e2])
    assert g1["stacked"] == 0.0 and g1["summary_growth"] < 0.2
    g2 = run_probe("growth", e2, s, previous=[e0, e1])
    assert g2["stacked"] == 1.0 and g2["summary_growth"] > 1.0
    assert g2["growth@session"] == pytest.approx(g2["summary_growth"])


def test_growth_with_failed_first_summary_is_an_error_not_a_number():
    s = constraint_session()
    e0 = event(s, 5, 5, "", summary_error="HTTP 500")
    e1 = event(s, 10, 10, "## Goal\n- x", n=1)
    got = run_probe("growth", e1, s, previous=[e0])
    assert got["summary_growth"] is None and got["growth@session"] is None


def test_redundant_compares_first_kept_ids():
    s = constraint_session()
    e0 = event(s, 10, 8, "x", first_kept_id="t:m008")
    same = event(s, 12, 8, "y", n=1, first_kept_id="t:m008")
    moved = event(s, 12, 10, "y", n=1)
    assert run_probe("redundant", e0, s) == {}
    assert run_probe("redundant", same, s, previous=[e0]) == {"redundant": 1.0}
    assert run_probe("redundant", moved, s, previous=[e0]) == {"redundant": 0.0}


def test_invariant_probes_read_replay_and_optional_fields():
    s = constraint_session()
    ev = event(
        s,
        13,
        13,
        "x",
        tokens=(250_000, 210_000),
        invariants=Invariants(tool_pairs_valid=False, lost_chars=1234, over_limit=False),
    )
    ev.truncated_chars = 99
    assert run_probe("over_limit", ev, s) == {"over_limit": 1.0}  # tokens_after > window
    assert run_probe("lost_chars", ev, s) == {"lost_chars": 1234.0, "truncated_chars": 99.0}
    assert run_probe("tool_pairs_valid", ev, s) == {"tool_pairs_valid": 0.0}


# --------------------------------------------------------------------------- carry_once


def test_carry_once_duplicated_missing_and_resummarized():
    s = constraint_session()
    project = "# PROJECT.md\nService: parser-svc\nDeploy: make release"
    memory = "# MEMORY.md\n- ids are ULIDs"
    gone = "# WORKSPACE.md\n- never shown"
    e0 = event(
        s,
        10,
        10,
        "summary",
        carried=[project, memory, gone],
        extra=[project + "\n\n" + memory + "\n" + memory],
    )
    later = event(
        s, 13, 13, "s2", n=1, request={"messages": [{"role": "user", "content": "old: " + project}]}
    )
    got = run_probe("carry_once", e0, s, later=[later])
    assert got["carry_missing"] == pytest.approx(1 / 3)
    assert got["carry_duplicated"] == pytest.approx(1 / 3)  # MEMORY.md twice
    assert got["carry_resummarized"] == pytest.approx(1 / 3)  # PROJECT.md in a later summarizer request
    assert got["carry_once"] == 0.0
    clean = event(s, 10, 10, "summary", carried=[project], extra=[project])
    assert (
        run_probe("carry_once", clean, s, later=[event(s, 13, 13, "s2", n=1, request={"messages": []})])[
            "carry_once"
        ]
        == 1.0
    )


# --------------------------------------------------------------------------- structure

GOOD = TEMPLATE.replace("## Goal", "## Goal\n- fix the parser").replace(
    "## Next Steps", "## Next Steps\n1. run tests"
)
REQ = {"messages": [{"role": "system", "content": "Use:\n" + TEMPLATE}], "max_tokens": 4096}


@pytest.mark.parametrize(
    ("summary", "meta", "expect"),
    [
        (GOOD, {}, {"structure_ok": 1.0, "structure_sections": 1.0}),
        (GOOD.replace("## Key Decisions\n", "") + "\n## Key Decisions", {}, {"structure_ok": 0.0}),
        (TEMPLATE.replace("\n", "\n- (none found)\n"), {}, {"structure_ok": 0.0, "summary_empty": 1.0}),
        ("I'm sorry, but I can't help with summarizing this conversation.", {}, {"summary_refusal": 1.0}),
        (GOOD, {"finish_reason": "length"}, {"structure_ok": 0.0, "summary_truncated": 1.0}),
        (GOOD + "x" * 20_000, {}, {"structure_ok": 0.0, "summary_truncated": 1.0}),
    ],
)
def test_structure_sections_and_bad_summary_flags(summary, meta, expect):
    s = constraint_session()
    got = run_probe("structure", event(s, 13, 13, summary, request=REQ, meta=meta), s)
    for k, v in expect.items():
        assert got[k] == v, k
    if summary.startswith("I'm sorry"):
        assert got["structure_ok"] == 0.0 and got["structure_sections"] == 0.0


def test_summary_error_gives_error_rows_for_summary_metrics_and_values_for_invariants():
    s = constraint_session()
    ev = event(s, 13, 13, "", summary_error="backend: HTTP 500", request=REQ)
    rows = score_events(
        SessionView(s, compute_facts(s)),
        {"a": [ev]},
        Suite("t", [(n, {}) for n in ("structure", "summary_size", "constraints_kept", "over_limit")]),
    )
    by = {r.metric: r for r in rows}
    for m in ("structure_ok", "summary_empty", "summary_words", "constraints_kept"):
        assert math.isnan(by[m].value) and "HTTP 500" in by[m].error, m
    assert by["over_limit"].value == 0.0 and by["over_limit"].error is None


def test_session_level_rows_use_minus_one():
    s = constraint_session()
    evs = [event(s, 5, 5, "## Goal\n- a", n=0), event(s, 10, 10, "## Goal\n- a b c d", n=1)]
    rows = score_events(SessionView(s, compute_facts(s)), {"a": evs}, Suite("t", [("growth", {})]))
    g = [r for r in rows if r.metric == "growth"]
    assert len(g) == 1 and (g[0].event, g[0].round) == (-1, -1) and g[0].value == pytest.approx(5 / 3)


def test_every_probe_is_documented_with_metrics_and_catches():
    for e in PROBES:
        assert e.description and e.info["catches"] and e.info["doc"], e.name
        assert e.info["metrics"] and set(e.info["metrics"].values()) <= {"higher", "lower", "info"}


def test_tally_present_is_unknown_when_the_latest_run_printed_no_tally():
    # Issue #13: a crashed latest run must not let the previous run's tally count as "latest".
    from evalkit.score import ProbeInput
    from tests.conftest import FIXTURES

    b = Builder()
    b.user("run the tests")
    b.tool("bash", {"command": "pytest -q"}, "12 passed, 3 failed in 0.40s", 1)
    crashed = (FIXTURES / "runner_output" / "pytest_crashed.txt").read_text()
    b.tool("bash", {"command": "pytest -q -x"}, crashed, 3)
    b.user("and now?")
    s = b.session()
    ev = event(s, at=6, keep_from=5, summary="- 12 passed, 3 failed")
    inp = ProbeInput(ev, SessionView(s, compute_facts(s)), [], [])
    (v,) = PROBES.get("tally_present")(inp)
    assert (v.metric, v.value) == ("tally_present", None)
    assert v.error and "unknown" in v.error
