"""Test-tally parsers: find a runner's pass/fail summary in a tool's output.

Each parser is registered by runner name and returns the *final* tally of one output (the one
a reader would quote), with the character offset where that tally line starts. Offsets matter:
a summarizer that only sees an output's first 2,000 characters misses every tally past that
point (seed 000: 66% of long test results).

Formats follow each runner's own summary line; the real outputs they are tested on are in
``tests/fixtures/runner_output/`` with the runner versions that produced them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from evalkit.common.registry import Registry


@dataclass(frozen=True, slots=True)
class Tally:
    """A runner's summary: counts as the runner reports them, and where the line sits."""

    runner: str
    passed: int
    failed: int
    errors: int = 0
    skipped: int = 0
    offset: int = 0
    line: str = ""
    unit: str = "tests"  # go test without -v only reports packages

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped

    def counts(self) -> dict[str, int]:
        return {"passed": self.passed, "failed": self.failed, "errors": self.errors, "skipped": self.skipped}


Parser = Callable[[str], Tally | None]
TALLY_PARSERS: Registry[Parser] = Registry("tally_parser")

_NUM = r"(\d+)"


def _line_at(text: str, pos: int) -> tuple[int, str]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, text[start : end if end >= 0 else len(text)].strip()


def _last(pattern: re.Pattern, text: str) -> re.Match | None:
    m = None
    for m in pattern.finditer(text):  # noqa: B007 - we want the last match
        pass
    return m


# pytest: "==== 2 failed, 5 passed, 1 skipped, 1 error in 0.12s ====" (or the same without
# the rules under -q). The " in <time>" tail is what tells it from the plain line.
_PYTEST_ITEM = r"\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
_PYTEST = re.compile(
    rf"^[=\s]*((?:{_PYTEST_ITEM})(?:, {_PYTEST_ITEM})*|no tests ran) in [\d.]+s(?: \([\d:.]+\))?[=\s]*$",
    re.M,
)


@TALLY_PARSERS.register(
    "pytest",
    "pytest's final '== N failed, M passed in Xs ==' line",
    needles=("passed", "failed", "error", "skipped", "no tests ran"),
)
def parse_pytest(text: str) -> Tally | None:
    m = _last(_PYTEST, text)
    if not m:
        return None
    counts = dict.fromkeys(("passed", "failed", "error", "skipped"), 0)
    for n, word in re.findall(r"(\d+) (\w+)", m.group(1)):
        key = "error" if word.startswith("error") else word
        if key in counts:
            counts[key] += int(n)
    start, line = _line_at(text, m.start(1))
    return Tally(
        "pytest", counts["passed"], counts["failed"], counts["error"], counts["skipped"], start, line
    )


# unittest: "Ran 5 tests in 0.001s" then a blank line and "OK", "OK (skipped=1)" or
# "FAILED (failures=1, errors=1, skipped=1)".
_UNITTEST = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*\n?(OK|FAILED)(?: \(([^)]*)\))?", re.M)


@TALLY_PARSERS.register(
    "unittest", "Python unittest's 'Ran N tests' + 'OK' / 'FAILED (failures=…)'", needles=("Ran ",)
)
def parse_unittest(text: str) -> Tally | None:
    m = _last(_UNITTEST, text)
    if not m:
        return None
    ran = int(m.group(1))
    # "expected failures=1" must not be read as "failures=1": split on commas, keep whole keys.
    kv = dict(re.findall(r"(?:^|, )([a-z_ ]+)=(\d+)", m.group(3) or ""))
    # unittest spells it "unexpected successes=1" (a space); it fails the run like a failure does.
    failed = int(kv.get("failures", 0)) + int(kv.get("unexpected successes", 0))
    errors = int(kv.get("errors", 0))
    skipped = int(kv.get("skipped", 0))
    passed = ran - failed - errors - skipped
    start, _ = _line_at(text, m.start())
    return Tally("unittest", passed, failed, errors, skipped, start, " ".join(m.group(0).split()))


# jest: "Tests:       1 failed, 1 skipped, 4 passed, 6 total"
_JEST = re.compile(r"^Tests:\s+((?:\d+ \w+, )*\d+ total)\s*$", re.M)


@TALLY_PARSERS.register("jest", "Jest's 'Tests: N failed, M passed, T total' line", needles=("Tests:",))
def parse_jest(text: str) -> Tally | None:
    m = _last(_JEST, text)
    if not m:
        return None
    kv = {w: int(n) for n, w in re.findall(r"(\d+) (\w+)", m.group(1))}
    start, line = _line_at(text, m.start())
    return Tally("jest", kv.get("passed", 0), kv.get("failed", 0), 0, kv.get("skipped", 0), start, line)


# vitest: "      Tests  1 failed | 4 passed | 1 skipped (6)"
_VITEST = re.compile(r"^\s*Tests\s{2,}((?:\d+ \w+)(?: \| \d+ \w+)*) \((\d+)\)\s*$", re.M)


@TALLY_PARSERS.register("vitest", "Vitest's 'Tests  N failed | M passed (T)' line", needles=("Tests  ",))
def parse_vitest(text: str) -> Tally | None:
    m = _last(_VITEST, text)
    if not m:
        return None
    kv = {w: int(n) for n, w in re.findall(r"(\d+) (\w+)", m.group(1))}
    start, line = _line_at(text, m.start(1))
    # Unhandled errors are counted apart from tests: "     Errors  1 error".
    err = re.search(r"^\s*Errors\s{2,}(\d+) errors?\s*$", text[m.end() :], re.M)
    return Tally(
        "vitest",
        kv.get("passed", 0),
        kv.get("failed", 0),
        int(err.group(1)) if err else 0,
        kv.get("skipped", 0),
        start,
        line,
    )


# mocha: "  4 passing (12ms)" then optional "  2 pending" and "  1 failing"
_MOCHA = re.compile(r"^\s*(\d+) passing \([\w.]+\)\s*$((?:\n\s*\d+ (?:pending|failing)\s*$)*)", re.M)


@TALLY_PARSERS.register(
    "mocha", "Mocha's 'N passing (Xms)' / 'N failing' / 'N pending' lines", needles=(" passing (",)
)
def parse_mocha(text: str) -> Tally | None:
    m = _last(_MOCHA, text)
    if not m:
        return None
    kv = {w: int(n) for n, w in re.findall(r"(\d+) (pending|failing)", m.group(2))}
    start, _ = _line_at(text, m.start(1))
    return Tally(
        "mocha",
        int(m.group(1)),
        kv.get("failing", 0),
        0,
        kv.get("pending", 0),
        start,
        " ".join(m.group(0).split()),
    )


# go test: per-test "--- PASS: TestX (0.00s)" lines under -v (failures are printed without -v
# too), and per-package "ok  \tpkg\t0.01s" / "FAIL\tpkg\t0.01s" / "FAIL" closing lines.
_GO_TEST = re.compile(r"^\s*--- (PASS|FAIL|SKIP): \S+ \(", re.M)
_GO_END = re.compile(r"^(?:ok|FAIL)(?:\s+\S+\s+(?:[\d.]+s|\(cached\)|\[[^\]]+\]).*)?$", re.M)


@TALLY_PARSERS.register(
    "go",
    "go test: '--- PASS/FAIL/SKIP' lines (subtests too) under -v, else 'ok'/'FAIL' per package",
    needles=("ok ", "ok\t", "FAIL"),
)
def parse_go(text: str) -> Tally | None:
    ends = list(_GO_END.finditer(text))
    if not ends:
        return None
    last = ends[-1]
    start, line = _line_at(text, last.start())
    # A package that does not compile runs no test: an error, not a failed test.
    build_failed = len(re.findall(r"^FAIL\s+\S+\s+\[(?:build|setup) failed\]", text, re.M))
    per_test = _GO_TEST.findall(text)
    # Without -v go prints failing tests but not passing ones, so per-test counts are only
    # complete when "=== RUN" lines show a verbose run. Subtests count as tests, as in
    # `go test -json`'s per-test records.
    if per_test and "=== RUN" in text:
        return Tally(
            "go",
            per_test.count("PASS"),
            per_test.count("FAIL"),
            build_failed,
            per_test.count("SKIP"),
            start,
            line,
        )
    pkgs = re.findall(r"^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))", text, re.M)
    if not pkgs and not build_failed:
        return None
    return Tally("go", pkgs.count("ok"), pkgs.count("FAIL"), build_failed, 0, start, line, unit="packages")


# cargo test: "test result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out"
# once per test binary (unit tests, each integration test, doc-tests); the run's tally is the sum.
_CARGO = re.compile(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored;.*$", re.M)


@TALLY_PARSERS.register(
    "cargo", "cargo test's 'test result: … N passed; M failed; K ignored' (summed)", needles=("test result:",)
)
def parse_cargo(text: str) -> Tally | None:
    ms = list(_CARGO.finditer(text))
    if not ms:
        return None
    p = sum(int(m.group(1)) for m in ms)
    f = sum(int(m.group(2)) for m in ms)
    s = sum(int(m.group(3)) for m in ms)
    start, line = _line_at(text, ms[-1].start())
    return Tally("cargo", p, f, 0, s, start, line)


# rspec: "5 examples, 1 failure, 2 pending" (", N errors occurred outside of examples" may follow)
_RSPEC = re.compile(
    r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?(?:, (\d+) errors? occurred outside of examples)?\s*$",
    re.M,
)


@TALLY_PARSERS.register("rspec", "RSpec's 'N examples, M failures, K pending' line", needles=(" example",))
def parse_rspec(text: str) -> Tally | None:
    m = _last(_RSPEC, text)
    if not m:
        return None
    n, f, pend, outside = (int(g) if g else 0 for g in m.groups())
    start, line = _line_at(text, m.start())
    return Tally("rspec", n - f - pend, f, outside, pend, start, line)


# phpunit: "OK (5 tests, 10 assertions)" or, after "FAILURES!"/"ERRORS!"/"OK, but …",
# "Tests: 5, Assertions: 8, Failures: 1, Errors: 1, Skipped: 1."
_PHPUNIT_OK = re.compile(r"^OK \((\d+) tests?, \d+ assertions?\)\s*$", re.M)
_PHPUNIT = re.compile(r"^Tests: (\d+), Assertions: \d+((?:, [A-Z][\w ]+: \d+)*)\.\s*$", re.M)


@TALLY_PARSERS.register(
    "phpunit",
    "PHPUnit's 'OK (N tests, …)' or 'Tests: N, Assertions: …, Failures: M.'",
    needles=("OK (", "Tests: "),
)
def parse_phpunit(text: str) -> Tally | None:
    ok, full = _last(_PHPUNIT_OK, text), _last(_PHPUNIT, text)
    if ok and (not full or ok.start() > full.start()):
        start, line = _line_at(text, ok.start())
        return Tally("phpunit", int(ok.group(1)), 0, 0, 0, start, line)
    if not full:
        return None
    kv = {k.strip().lower(): int(v) for k, v in re.findall(r", ([A-Z][\w ]+): (\d+)", full.group(2))}
    failed, errors = kv.get("failures", 0), kv.get("errors", 0)
    skipped = kv.get("skipped", 0)
    start, line = _line_at(text, full.start())
    passed = int(full.group(1)) - failed - errors - skipped - kv.get("incomplete", 0)
    return Tally("phpunit", passed, failed, errors, skipped, start, line)


# Maven Surefire: "Tests run: 5, Failures: 1, Errors: 0, Skipped: 1" per class and once more
# under "Results:" for the module; the last one is the module's total.
_SUREFIRE = re.compile(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)(?!, Time elapsed)")


@TALLY_PARSERS.register(
    "surefire", "Maven Surefire's 'Tests run: N, Failures: F, Errors: E, Skipped: S'", needles=("Tests run:",)
)
def parse_surefire(text: str) -> Tally | None:
    m = _last(_SUREFIRE, text)
    if not m:
        return None
    run, f, e, s = (int(g) for g in m.groups())
    start, line = _line_at(text, m.start())
    return Tally("surefire", run - f - e - s, f, e, s, start, line)


# ctest: "80% tests passed, 1 tests failed out of 5"
_CTEST = re.compile(r"^\d+% tests passed, (\d+) tests? failed out of (\d+)\s*$", re.M)


@TALLY_PARSERS.register(
    "ctest", "CTest's 'N% tests passed, F tests failed out of T'", needles=("tests passed",)
)
def parse_ctest(text: str) -> Tally | None:
    m = _last(_CTEST, text)
    if not m:
        return None
    failed, total = int(m.group(1)), int(m.group(2))
    # Disabled/skipped tests are listed as "(Disabled)" / "(Skipped)" after "did not run:".
    skipped = len(re.findall(r"^\s*\d+ - \S+ \((?:Skipped|Disabled)\)", text[m.end() :], re.M))
    start, line = _line_at(text, m.start())
    return Tally("ctest", max(total - failed - skipped, 0), failed, 0, skipped, start, line)


# node --test: the spec reporter ends with "ℹ tests 8" … "ℹ todo 1" lines, the TAP reporter with
# the same keys after "# ". Cancelled tests (a timeout, a parent that failed first) are errors.
_NODE = re.compile(
    r"^[ℹ#] tests (\d+)\s*\n(?:[ℹ#] suites \d+\s*\n)?[ℹ#] pass (\d+)\s*\n[ℹ#] fail (\d+)\s*\n"
    r"[ℹ#] cancelled (\d+)\s*\n[ℹ#] skipped (\d+)\s*\n(?:[ℹ#] todo (\d+))?",
    re.M,
)


@TALLY_PARSERS.register(
    "node",
    "node --test's 'ℹ tests N / pass / fail / cancelled / skipped' (spec or TAP '# ')",
    needles=("tests ",),
)
def parse_node(text: str) -> Tally | None:
    m = _last(_NODE, text)
    if not m:
        return None
    _, passed, failed, cancelled, skipped, _todo = (int(g) if g else 0 for g in m.groups())
    start, line = _line_at(text, m.start())
    return Tally("node", passed, failed, cancelled, skipped, start, line)


# The plain line any tool can print: "N passed, N failed" alone on a line, optionally
# ", N skipped" after it and one word with a colon before it.
_PLAIN = re.compile(r"^\s*(?:\w+:\s*)?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$", re.M)


@TALLY_PARSERS.register(
    "plain", "the plain 'N passed, N failed' line (', N skipped' optional)", needles=(" passed, ",)
)
def parse_plain(text: str) -> Tally | None:
    m = _last(_PLAIN, text)
    if not m:
        return None
    start, line = _line_at(text, m.start(1))
    return Tally("plain", int(m.group(1)), int(m.group(2)), 0, int(m.group(3) or 0), start, line)


# When several parsers match one output the latest tally wins; on a tie the more specific
# runner wins over the plain line.
_SPECIFICITY = {"plain": 0}


# Escape sequences a coloured or TTY run prints: CSI (colours, cursor), OSC (titles, links) and
# character-set designations ("ESC(B" after tput sgr0).
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z])")
# What log collectors put before each line of a runner's output: act's "[job/step]   | ",
# ISO timestamps (GitHub Actions raw logs, `ts`), box-drawing rails (docker buildx, earthly).
_PREFIX = re.compile(r"^(?:\[[^\]\n]{1,120}\]\s*\|\s?|\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\s+|[│┃║|]\s)+", re.M)


def clean_output(text: str) -> tuple[str, list[int] | None]:
    """``text`` without escape codes, carriage returns and per-line log prefixes, with the map
    from each kept character to its offset in ``text`` (None when nothing was removed)."""
    cuts = [(m.start(), m.end()) for m in _ANSI.finditer(text)] if "\x1b" in text else []
    if "\r" in text:
        cuts += [(m.start(), m.end()) for m in re.finditer(r"\r+", text)]
    cuts += [(m.start(), m.end()) for m in _PREFIX.finditer(text) if m.end() > m.start()]
    if not cuts:
        return text, None
    cuts.sort()
    parts, index, pos = [], [], 0
    for a, b in cuts:
        if b <= pos:
            continue
        a = max(a, pos)
        parts.append(text[pos:a])
        index.extend(range(pos, a))
        pos = b
    parts.append(text[pos:])
    index.extend(range(pos, len(text)))
    return "".join(parts), index


def _best(text: str, entries: list) -> Tally | None:
    best: Tally | None = None
    for entry in entries:
        t = entry.obj(text)
        if t is None:
            continue
        key = (t.offset, _SPECIFICITY.get(t.runner, 1))
        if best is None or key > (best.offset, _SPECIFICITY.get(best.runner, 1)):
            best = t
    return best


def find_tally(text: str) -> Tally | None:
    """The final tally in ``text`` by any registered parser, or None.

    Colour codes, carriage returns and log prefixes are removed before parsing; the offset
    returned is still the tally line's offset in ``text`` itself.
    """
    if not text:
        return None
    # Substring checks are ~100x cheaper than the regexes; most outputs hold no tally at all.
    # Escape codes wrap words but do not split them, so the raw text is checked.
    has = text.__contains__
    entries = [e for e in TALLY_PARSERS if not e.info.get("needles") or any(map(has, e.info["needles"]))]
    if not entries:
        return None
    raw = "\x1b" not in text and "\r" not in text
    best = _best(text, entries) if raw else None
    if raw and (best is not None or not _PREFIX.search(text)):
        return best
    cleaned, index = clean_output(text)
    if index is None:
        return best
    t = _best(cleaned, entries)
    if t is None:
        return best
    off = index[t.offset] if t.offset < len(index) else len(text)
    return Tally(t.runner, t.passed, t.failed, t.errors, t.skipped, off, t.line, t.unit)
