"""The per-session text index answers "is X visible after this compaction?" exactly as searching
the event's joined visible text does, for kept, masked and newly written messages."""

from __future__ import annotations

import random

import pytest

from evalkit.facts import compute_facts
from evalkit.score import ProbeInput, SessionView
from evalkit.score.base import FORMS
from evalkit.score.textindex import TextIndex
from tests.support.probe_sessions import Builder, event


def test_positions_are_per_message_and_never_span_two():
    idx = TextIndex(["alpha beta", "gamma", "beta gamma beta"])
    assert idx.positions("beta") == {0, 2}
    assert idx.positions("gamma") == {1, 2}
    assert idx.positions("betagamma") == frozenset()
    assert idx.positions("betagam") == frozenset()  # "alpha beta" + "gamma" never join
    assert idx.positions("delta") == frozenset()


def test_verify_sees_each_occurrence_in_the_plain_text():
    lower, plain = ["see #12 and #123", "issue 12"], ["See #12 and #123", "Issue 12"]
    idx = TextIndex(lower, plain)
    seen = []

    def verify(text: str, at: int) -> bool:
        seen.append((text, at))
        return text[at - 1] == "#" and not text[at + 2 : at + 3].isdigit()

    assert idx.positions("12", verify) == {0}
    assert ("See #12 and #123", 5) in seen and ("See #12 and #123", 13) not in seen  # stops at a hit
    assert ("Issue 12", 6) in seen


def _session():
    b = Builder()
    rnd = random.Random(7)
    words = ["pytest", "FAILED", "tests/test_api.py", "  ", "ok", "3 passed", "#42", "main", "Error:", "x"]
    for k in range(30):
        text = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 12)))
        if k % 3 == 0:
            b.user(text)
        else:
            b.tool("bash", {"cmd": text[:20]}, text + "\n" + " ".join(rnd.choice(words) for _ in range(6)))
    return b.session()


def test_visible_has_matches_searching_the_joined_visible_text():
    s = _session()
    view = SessionView(s, compute_facts(s))
    rnd = random.Random(11)
    needles = ["pytest", "3 passed", "#42 main", "FAILED tests/test_api.py", "ok ok", "error", "x x x", "zzz"]
    for n, keep_from in enumerate((5, 12, 20, 29)):
        ev = event(s, 29, keep_from, "Summary: pytest 3 passed; Error: zzz", n=n, extra=["carry: main"])
        # Mask the outputs of some kept messages, as observation masking does.
        ev.new_context = [
            {**e, "mask": "outputs"} if "ref" in e and rnd.random() < 0.4 else e for e in ev.new_context
        ]
        inp = ProbeInput(ev, view)
        for form, fn in FORMS.items():
            joined = inp.visible_text() if form == "plain" else "\n".join(fn(t) for t in inp.message_texts())
            for needle in needles:
                probe = fn(needle) if form != "plain" else needle
                assert inp.visible_has(probe, form) == (probe in joined), (form, needle, keep_from)


def _masked_events(s, rnd):
    evs = []
    for n, keep_from in enumerate((12, 20, 26)):
        ev = event(s, 29, keep_from, "Summary: pytest 3 passed", n=n)
        ev.new_context = [
            {**e, "mask": "outputs"} if "ref" in e and rnd.random() < 0.4 else e for e in ev.new_context
        ]
        evs.append(ev)
    return evs


def test_a_view_shown_only_its_events_answers_as_a_whole_one_and_renders_no_other_message():
    s = _session()
    evs = _masked_events(s, random.Random(3))
    whole, shown = SessionView(s, compute_facts(s)), SessionView(s, compute_facts(s))
    shown.show_only(evs)
    needles = ["pytest", "3 passed", "#42", "FAILED", "ok ok", "main", "x x", "zzz"]
    for ev in evs:
        a, b = ProbeInput(ev, whole), ProbeInput(ev, shown)
        for form, fn in FORMS.items():
            for needle in needles:
                probe = fn(needle) if form != "plain" else needle
                assert a.visible_has(probe, form) == b.visible_has(probe, form), (form, needle)
            assert a._form_texts(form) == b._form_texts(form)
    # Messages 1-11 are in no event's context (0 is the system message): never rendered, never found.
    assert shown.form_texts("plain")[1:12] == [None] * 11
    assert shown.form_texts("plain", masked=True)[1:12] == [None] * 11
    assert not any(0 < p < 12 for p in shown.hits("pytest"))
    assert any(0 < p < 12 for p in whole.hits("pytest"))
    kept = {
        s.messages.index(shown.by_id[e["ref"]])
        for ev in evs
        for e in ev.new_context
        if "ref" in e and not e.get("mask")
    }
    assert [i for i, t in enumerate(shown.form_texts("plain")) if t is not None] == sorted(kept)


def test_show_only_after_the_view_was_read_refuses_to_show_more():
    s = _session()
    evs = _masked_events(s, random.Random(3))
    view = SessionView(s, compute_facts(s))
    view.show_only(evs[1:])  # keeps from message 20 on
    assert not any(0 < p < 20 for p in view.hits("pytest"))
    view.show_only(evs[2:])  # shows nothing new: allowed, and changes nothing
    assert view.form_texts("plain")[1:20] == [None] * 19
    with pytest.raises(RuntimeError, match="show_only"):
        view.show_only(evs)  # the first event keeps from message 12: its caches lack 12-19
    whole = SessionView(s, compute_facts(s))
    whole.hits("pytest")
    whole.show_only(evs)  # read unrestricted: every position is covered already
    assert any(0 < p < 12 for p in whole.hits("pytest"))


def test_any_is_true_exactly_where_one_text_holds_a_verified_occurrence():
    lower, plain = (
        ["see #12 and #123", "issue 12", "x #1", "2 y"],
        ["See #12 and #123", "Issue 12", "x #1", "2 y"],
    )
    idx = TextIndex(lower, plain)

    def hash_bounded(text: str, at: int) -> bool:
        return text[at - 1 : at] == "#" and not text[at + 2 : at + 3].isdigit()

    assert idx.any("12", hash_bounded)
    # the first two occurrences fail the check ("issue 12", "#123"), the third in another text holds
    assert TextIndex(["issue 12", "see #123 and #12"]).any("12", hash_bounded)
    assert not TextIndex(["see #123", "issue 12"]).any("12", hash_bounded)
    assert not idx.any("#1\x002")  # never across two texts
    assert not idx.any("1" + "\x00" + "2") and idx.any("#1") and not idx.any("zz")
    for needle in ("12", "#12", "issue", "y", "", "\x00"):
        want = any(needle in t for t in lower)
        assert idx.any(needle) == want, needle


def test_a_needle_without_a_line_break_is_found_in_the_distinct_lines_as_in_the_texts():
    """``positions`` looks for a needle without a line break in the texts' distinct lines, then
    verifies occurrences in the texts holding one: the same positions as scanning every text, for
    needles inside longer lines, at text edges, next to the breaks ``str.splitlines`` splits on
    ("\r\n", "\x1c", "\u2028", ...), and with a check that holds at some occurrences only."""
    pieces = ["#12", "#123", "12", "a1b2", "A1B2c", "src/app.py", "app.py", "é", "x", "-", "", "\x00", "İ"]
    seps = [" ", "\n", "\r", "\r\n", "\t", "\x0b", "\x1c", "\x85", "\u2028", "\u3000", "", ".", "#"]
    rng = random.Random(35)
    plain = ["", "12", " 12 ", "#12#12"] + [
        "".join(rng.choice(pieces) + rng.choice(seps) for _ in range(rng.randrange(0, 25)))
        for _ in range(400)
    ]
    lower = [t.lower() for t in plain]
    texts = [*lower[:100], None, *lower[100:]]  # a None text is left out, never found
    idx = TextIndex(texts, [*plain[:100], None, *plain[100:]])

    def hash_bounded(text: str, at: int) -> bool:
        return text[at - 1 : at] == "#" and not text[at + 2 : at + 3].isdigit()

    def scanned(needle, verify):
        return frozenset(idx.ids[i] for i in idx._holding(needle, verify))

    needles = [
        "12",
        "#12",
        "a1b2",
        "src/app.py",
        "py",
        "é",
        "x-",
        "\x00",
        "12\x0012",
        "zz",
        "i̇",
        "12 a1b2",
        "2\t#",
    ]
    for needle in needles:
        for verify in (None, hash_bounded):
            assert idx.positions(needle, verify) == scanned(needle, verify), (needle, verify)
    assert idx._lines is not None and len(idx.positions("12")) > 100  # the line path ran, and found
    # needles with a line break are scanned in the texts, never looked up as lines
    for needle in ("12\na1b2", "12\r\n#", "2\x1c#", "a1b2\u2028", "\x85"):
        assert idx.positions(needle) == scanned(needle, None) != frozenset(), needle


def test_an_events_positions_from_show_only_are_its_own_and_an_unknown_reference_still_raises():
    from evalkit.score.base import context_positions

    s = _session()
    evs = _masked_events(s, random.Random(3))
    bad = event(s, 29, 20, "Summary", n=9)
    bad.new_context = [*bad.new_context, {"ref": "no-such-message"}]
    view = SessionView(s, compute_facts(s))
    view.show_only([*evs, bad])
    n = len(s.messages)
    for ev in evs:
        assert ProbeInput(ev, view).positions() == context_positions(ev, view.index, n)
        assert any(p is not None and p >= n for p in context_positions(ev, view.index, n))  # masked copies
    with pytest.raises(KeyError):
        ProbeInput(bad, view).positions()
    moved = evs[0]
    moved.new_context = moved.new_context[:3]  # a new context after show_only: its own positions
    assert ProbeInput(moved, view).positions() == context_positions(moved, view.index, n)
