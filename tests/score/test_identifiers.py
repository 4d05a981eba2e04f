"""Identifier recall: exact, bounded matching on real-shaped text, and masked output counts as gone."""

from __future__ import annotations

from evalkit.contracts.session import Text
from evalkit.facts import Identifier, compute_facts
from evalkit.score import ProbeInput, SessionView
from evalkit.score.identifiers import identifier_visible
from evalkit.score.judge import select_questions
from tests.support.probe_sessions import Builder, event, run_probe

SHA = "9f3c2ab71e"


def test_sha_is_found_in_prose_and_in_a_log_line():
    assert identifier_visible(("sha", SHA), f"Reverted {SHA} because it broke the build.")
    assert identifier_visible(("sha", SHA), f"commit {SHA.upper()}\nAuthor: x")
    assert identifier_visible(("sha", "9f3c2ab"), "fix landed in (9f3c2ab).")


def test_sha_is_not_a_hex_colour_nor_part_of_a_longer_hash():
    assert not identifier_visible(("sha", "a1b2c3"), "color: #a1b2c3; background: #fff")
    assert not identifier_visible(("sha", "9f3c2ab"), f"HEAD is {SHA}")  # a longer hash, another commit
    assert not identifier_visible(("sha", SHA), "9f3c2ab71e_backup.tar")


def test_url_with_trailing_punctuation_is_found_but_a_longer_path_is_not():
    url = "https://github.com/acme/widgets/actions/runs/8812"
    assert identifier_visible(("url", url), f"The failing run is {url}.")
    assert identifier_visible(("url", url), f"(see {url}), then retry")
    assert identifier_visible(("url", url), f"Links: {url}; {url}?page=2")
    assert not identifier_visible(("url", url), f"{url}/job/3 failed")
    assert not identifier_visible(("url", url), f"{url}99 failed")
    assert not identifier_visible(("url", url), f"{url}.json")


def test_pr_number_is_not_a_markdown_heading_nor_a_longer_number():
    assert identifier_visible(("pr", "#123"), "Opened PR #123 for the fix.")
    assert identifier_visible(("pr", "#123"), "Merged pull request 123 into main")
    assert identifier_visible(("pr", "#123"), "https://github.com/acme/widgets/pull/123")
    assert not identifier_visible(("pr", "#123"), "# 123\n\nSome heading text")
    assert not identifier_visible(("pr", "#123"), "see #1234 and #12")
    assert not identifier_visible(("pr", "#123"), "&#123; is an HTML entity")


def test_symbol_branch_dir_and_error_are_bounded_or_exact():
    assert identifier_visible(("symbol", "parse_config"), "Edited parse_config() in config.py")
    assert not identifier_visible(("symbol", "parse_config"), "Edited parse_config_v2")
    assert identifier_visible(("branch", "fix/login-redirect"), "pushed fix/login-redirect.")
    assert not identifier_visible(("branch", "fix/login"), "pushed fix/login-redirect")
    assert identifier_visible(("dir", "build/out"), "mkdir build/out done")
    assert not identifier_visible(("dir", "build"), "created build/out")
    err = "ModuleNotFoundError: No module named 'yaml'"
    assert identifier_visible(Identifier(0, "error", err), "E   ModuleNotFoundError: No module named\n'yaml'")
    assert not identifier_visible(Identifier(0, "error", err), "ModuleNotFoundError: No module named 'toml'")


def _session():
    b = Builder()
    b.user(f"Please look at PR #481 and cherry-pick {SHA} onto main.")
    b.tool(
        "bash", {"command": "git checkout -b hotfix/cache-ttl"}, "Switched to a new branch 'hotfix/cache-ttl'"
    )
    b.tool("bash", {"command": "python -c 'import yaml'"}, "ModuleNotFoundError: No module named 'yaml'", 1)
    b.user("Thanks, now continue.")
    b.add("assistant", Text("ok"))
    return b.session()


def test_probe_counts_only_identifiers_that_left_the_view():
    s = _session()
    facts = compute_facts(s)
    kinds = {i.kind for i in facts.identifiers}
    assert {"pr", "sha", "branch", "error"} <= kinds
    # Everything up to message 6 left the view; the summary keeps the PR and the SHA only.
    ev = event(s, 7, 7, f"Working on PR #481; cherry-picking {SHA}.")
    got = run_probe("identifiers", ev, s)
    assert got["identifiers_left"] == 4
    assert got["identifier_recall"] == 0.5
    assert got["identifier_recall_pr"] == 1.0 and got["identifier_recall_branch"] == 0.0
    # Nothing left the view: no row (not a 1.0).
    assert run_probe("identifiers", event(s, 7, 1, "-"), s) == {}


def test_masked_output_has_left_the_view_for_identifiers_and_judge():
    s = _session()
    ev = event(s, 7, 1, "")
    fail = next(i for i, m in enumerate(s.messages) if m.tool_results() and m.tool_results()[0].is_error)
    ev.new_context = [
        {"ref": m.id, "mask": "outputs"} if i == fail else {"ref": m.id} for i, m in enumerate(s.messages[:8])
    ]
    got = run_probe("identifiers", ev, s)
    assert got["identifiers_left"] == 1 and got["identifier_recall_error"] == 0.0
    inp = ProbeInput(ev, SessionView(s, compute_facts(s)))
    asked = select_questions(inp, per_kind=0)
    assert [q["kind"] for q in asked] == ["recall"] and asked[0]["source"] == fail


def test_identifier_exam_skips_what_the_last_user_message_states():
    """A question the latest user message answers would reward copying it: not asked."""
    b = Builder()
    b.user(f"Please look at PR #481 and cherry-pick {SHA} onto main.")
    b.tool(
        "bash", {"command": "git checkout -b hotfix/cache-ttl"}, "Switched to a new branch 'hotfix/cache-ttl'"
    )
    b.user(f"Remember: {SHA} is the one to pick.")
    b.add("assistant", Text("ok"))
    s = b.session()
    ev = event(s, 5, 5, f"Cherry-picking {SHA}; branch hotfix/cache-ttl.")
    got = run_probe("identifiers", ev, s)
    assert got["identifiers_left"] == 3 and got["identifier_recall"] == 2 / 3  # PR #481 lost
    qs = {m: v for m, v in got.items() if m.startswith("identifier_q:")}
    assert sorted(m.split(":")[1] for m in qs) == ["branch", "pr"]  # the SHA is in the last user message
    assert got["identifier_exam"] == 0.5 and sorted(qs.values()) == [0.0, 1.0]
