"""The offline judge's reader: BM25 over the context's own passages, a call's result with its call,
a reading budget in characters, no knowledge of how questions are phrased."""

from __future__ import annotations

from evalkit.models import offline_judge as oj

# A structured summary's headings share words with the question ("files", "test"); the raw
# history holds the rare identifiers. Many passages say "test", one names the command.
HISTORY = [
    "user: Fix the flaky test in the test suite; every test should pass.",
    "assistant: Running the test suite once more to see which test fails.",
    'assistant: Bash {"command": "pytest tests/unit/test_cache.py -q"}',
    "tool: FAILED tests/unit/test_cache.py::test_expiry - KeyError: 'ttl'\n1 failed, 4 passed in 0.2s",
    "assistant: The test output is long; the test helper test_utils is fine.",
    "user: Also check the test fixtures and the test data files.",
]


def _scores(question, texts):
    return oj.bm25([oj.counts(question, t.lower()) for t in texts], [len(t) for t in texts])


def test_rare_terms_outweigh_common_ones():
    scores = _scores("What error did the test `pytest tests/unit/test_cache.py -q` fail with?", HISTORY)
    best = max(range(len(HISTORY)), key=scores.__getitem__)
    assert best in (2, 3)  # the call or its result: the messages naming the path
    # "test" is in every message: alone it weighs little
    assert 5 * max(_scores("the test", HISTORY)) < scores[best]


def test_the_result_after_a_hit_is_read_with_it():
    # a budget for the call and its result only: the command's result is quoted though it shares
    # no word with the question but the path
    text = oj.answer("What happened when `pytest tests/unit/test_cache.py -q` ran?", HISTORY, max_chars=200)
    assert "KeyError: 'ttl'" in text
    assert oj.grade([], text, {"passed": 4, "failed": 1, "errors": 0, "skipped": 0}) == [True]


def test_the_budget_is_in_characters_and_quotes_follow_the_context_order():
    text = oj.answer("Which test files and test fixtures?", HISTORY, max_chars=150)
    assert 0 < len(text) <= 150
    quoted = [h for h in HISTORY if h.split("\n")[0] in text]
    assert quoted == sorted(quoted, key=HISTORY.index)


def test_on_equal_scores_the_later_passage_is_read_first():
    same = ["note: build one", "note: build two", "note: build six"]
    scores = _scores("What about the note?", same)
    assert len(set(scores)) == 1 and scores[0] > 0
    # the newer state wins a tight budget
    assert oj.answer("the note", same, max_chars=30) == "note: build six"


def test_long_one_line_calls_are_wrapped_at_a_space_and_nothing_is_lost():
    call = "assistant: Edit " + " ".join(f"word{i}" for i in range(400))
    ps = oj.passages(call)
    assert len(ps) > 1 and all(len(ln) <= 240 for p in ps for ln in p.text.splitlines())
    assert " ".join(" ".join(p.text.split()) for p in ps) == " ".join(call.split())


def test_plurals_fold_and_compounds_count_whole_and_in_parts():
    assert oj.terms("Which files?") == ["file"]
    assert oj.terms("src/lib/io.py") == ["src/lib/io.py", "src", "lib", "io", "py"]
    assert oj.terms("status class 404s") == ["status", "class", "404s"]


def test_short_terms_are_counted_as_the_plain_whole_word_pattern_counts_them():
    """The short-term pattern checks what precedes a form after the form matched: it finds the
    same whole-word forms, in the same order, as the look-behind-first pattern, at the start and
    end of a text, next to digits and underscores, and for forms that are not one run ("i.e")."""
    import random
    import re
    from collections import Counter

    questions = [
        "What did the user most recently ask for, i.e. what should be done next?",
        "Which files have been modified so far?",
        "What was the result of the most recent test run (`npm run test -- src/app.py`)? Give the exact counts.",
        "What error did the command `ls 42 a.b x-1` fail with?",
    ]
    pieces = [
        "ask",
        "asks",
        "i.e",
        "i.es",
        "i.e.g",
        "far",
        "fars",
        "run",
        "runs",
        "npm",
        "src",
        "py",
        "ls",
        "42",
        "420",
        "a.b",
        "a.b.c",
        "x-1",
        "x-12",
        "b",
        "asked",
        "_run",
        "run_",
        "ie",
        "e.g",
    ]
    seps = [" ", ".", "/", "-", "_", "\n", "", "(", "é", "9"]
    rng = random.Random(35)
    texts = ["ask", "asks far", "far.", "i.e", "i.e. far", "runs run", "x-1x-1 a.b.a.b", "ls42 42ls 42"]
    texts += [
        "".join(rng.choice(pieces) + rng.choice(seps) for _ in range(rng.randrange(1, 30)))
        for _ in range(3000)
    ]
    for question in questions:
        m = oj.matcher(question)
        assert m.short, question
        alts = "|".join(re.escape(f) for f in sorted(m.short, key=len, reverse=True))
        plain = re.compile(rf"(?<![a-z0-9])(?:{alts})(?![a-z0-9])")
        for text in texts:
            want, got = Counter(plain.findall(text)), Counter(m.pattern.findall(text))
            assert list(got.items()) == list(want.items()), (question, text)
