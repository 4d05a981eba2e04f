"""Tally parsers on real runner output (tests/fixtures/runner_output, see its README for the
runner versions and commands) and on adversarial text."""

from __future__ import annotations

import pytest

from evalkit.facts import TALLY_PARSERS, find_tally
from tests.conftest import FIXTURES

OUT = FIXTURES / "runner_output"

# file: (runner, passed, failed, errors, skipped, offset of the tally line, unit)
# Counts read by hand from each file (README there); unittest's offset is its "Ran N tests" line.
EXPECTED = {
    "pytest_fail.txt": ("pytest", 5, 6, 1, 1, 4121, "tests"),
    "pytest_pass.txt": ("pytest", 5, 0, 0, 0, 266, "tests"),
    "pytest_q_fail.txt": ("pytest", 5, 6, 1, 1, 3934, "tests"),
    "pytest_q_pass.txt": ("pytest", 5, 0, 0, 0, 80, "tests"),
    "unittest_fail.txt": ("unittest", 4, 3, 2, 1, 2971, "tests"),  # 3 ok + 1 expected failure
    "unittest_pass.txt": ("unittest", 3, 0, 0, 0, 205, "tests"),
    "jest_fail.txt": ("jest", 4, 5, 0, 1, 3019, "tests"),
    "jest_pass.txt": ("jest", 3, 0, 0, 0, 111, "tests"),
    "vitest_fail.txt": ("vitest", 5, 5, 1, 1, 4404, "tests"),
    "vitest_pass.txt": ("vitest", 3, 0, 0, 0, 91, "tests"),
    "mocha_fail.txt": ("mocha", 3, 5, 0, 2, 304, "tests"),
    "mocha_pass.txt": ("mocha", 3, 0, 0, 0, 41, "tests"),
    "gotest_fail.txt": ("go", 1, 2, 1, 0, 1323, "packages"),  # the [build failed] package is an error
    "gotest_pass.txt": ("go", 2, 0, 0, 0, 37, "packages"),
    "gotest_v_fail.txt": ("go", 6, 5, 1, 1, 1907, "tests"),  # subtests count; 1 package did not build
    "gotest_v_pass.txt": ("go", 7, 0, 0, 0, 445, "tests"),
    "cargo_fail.txt": ("cargo", 3, 7, 0, 1, 2284, "tests"),
    "cargo_bt_fail.txt": ("cargo", 3, 7, 0, 1, 9529, "tests"),
    "cargo_nff_fail.txt": ("cargo", 5, 9, 0, 1, 3487, "tests"),  # three test binaries, summed
    "cargo_pass.txt": ("cargo", 5, 0, 0, 0, 671, "tests"),
    "rspec_fail.txt": ("rspec", 4, 4, 1, 2, 2087, "tests"),
    "rspec_loaderror_fail.txt": ("rspec", 0, 0, 1, 0, 423, "tests"),
    "rspec_pass.txt": ("rspec", 3, 0, 0, 0, 70, "tests"),
    "phpunit_fail.txt": ("phpunit", 3, 2, 2, 1, 900, "tests"),  # 9 - 2 - 2 - 1 skipped - 1 incomplete
    "phpunit_pass.txt": ("phpunit", 3, 0, 0, 0, 171, "tests"),
    "ctest_fail.txt": ("ctest", 3, 5, 0, 1, 1936, "tests"),
    "ctest_pass.txt": ("ctest", 3, 0, 0, 0, 299, "tests"),
    "surefire_fail.txt": ("surefire", 3, 2, 1, 1, 2346, "tests"),
    "surefire_pass.txt": ("surefire", 3, 0, 0, 0, 1382, "tests"),
    # Generated for issue #13 (colour on, -v, TAP, log prefixes, a crashed run); see the README.
    "cargo_color_fail.txt": ("cargo", 2, 1, 0, 1, 594, "tests"),
    "node_default_pass.txt": ("node", 3, 0, 0, 0, 210, "tests"),
    "node_spec_fail.txt": ("node", 3, 3, 0, 1, 1455, "tests"),
    "node_spec_color_fail.txt": ("node", 3, 3, 0, 1, 1847, "tests"),
    "node_tap_fail.txt": ("node", 3, 3, 0, 1, 2185, "tests"),
    "pytest_color_fail.txt": ("pytest", 3, 2, 1, 1, 2529, "tests"),
    "pytest_color_v_fail.txt": ("pytest", 3, 2, 1, 1, 3312, "tests"),
    "pytest_act_prefix_fail.txt": ("pytest", 3, 2, 1, 1, 2162, "tests"),
    "pytest_timestamp_fail.txt": ("pytest", 3, 2, 1, 1, 2777, "tests"),
    "pytest_rail_fail.txt": ("pytest", 3, 2, 1, 1, 1670, "tests"),
    "unittest_unexpected_fail.txt": ("unittest", 3, 2, 0, 1, 870, "tests"),  # 1 unexpected success fails
    "pytest_crashed.txt": None,  # the process died mid-run: no tally, never an older one
}


def test_every_fixture_has_an_expectation():
    assert {p.name for p in OUT.glob("*.txt")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_runner_output(name):
    text = (OUT / name).read_text(encoding="utf-8")
    t = find_tally(text)
    if EXPECTED[name] is None:
        assert t is None
        return
    assert t is not None
    assert (t.runner, t.passed, t.failed, t.errors, t.skipped, t.offset, t.unit) == EXPECTED[name]
    assert text[t.offset :].lstrip("\x1b[0m").strip()  # the offset points at the start of a real line


def test_long_failing_runs_have_their_tally_past_2000():
    """Seed 000: the tally of a long test run often sits past the first 2,000 characters."""
    for name in ("pytest_fail.txt", "pytest_q_fail.txt", "jest_fail.txt", "cargo_fail.txt"):
        assert find_tally((OUT / name).read_text()).offset > 2000


def test_plain_line_with_label():
    t = find_tally("building...\nResult: 12 passed, 3 failed, 1 skipped\n")
    assert (t.runner, t.passed, t.failed, t.skipped) == ("plain", 12, 3, 1)


def test_plain_needs_the_whole_line():
    assert find_tally("we had 12 passed, 3 failed yesterday and more today") is None


def test_latest_tally_wins_over_an_earlier_one():
    text = "== 1 failed, 2 passed in 0.1s ==\nfixing\n== 3 passed in 0.1s ==\n"
    t = find_tally(text)
    assert (t.passed, t.failed, t.offset) == (3, 0, text.index("== 3"))


def test_no_digits_no_tally():
    assert find_tally("all good, nothing ran") is None
    assert find_tally("") is None


def test_every_parser_is_registered_with_a_description():
    names = set(TALLY_PARSERS.names())
    assert {
        "pytest",
        "unittest",
        "jest",
        "vitest",
        "mocha",
        "go",
        "cargo",
        "rspec",
        "phpunit",
        "surefire",
        "ctest",
        "plain",
    } <= names
    assert all(e.description for e in TALLY_PARSERS)
