"""Where a text occurs among a session's messages, searched once per session instead of per event.

Probes ask "is X visible after this compaction?" for the same X at many events of every arm. The
visible context is the event's new messages (summary, carried texts) plus recorded messages kept
from the session, and the kept ones are the same for every event and arm. So the session's
messages are joined once per text form (plain, whitespace-folded, normalized, lower-cased) and a
needle is searched once per session; an event then only intersects the needle's message positions
with the positions it keeps. A needle never matches across two messages: the join uses a
separator no needle contains (the per-event joined text the probes used before separated messages
with blank lines, which no needle of the probes spans).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator

SEP = "\x00"

# ``verify(plain_text, offset)``: is the occurrence of the needle at ``offset`` a real one (e.g. an
# identifier bounded by non-word characters)? Offsets index the form text, which for the
# lower-cased form is the plain text's offset too.
Verify = Callable[[str, int], bool]


def contains(text: str, needle: str, verify: Verify | None = None, plain: str | None = None) -> bool:
    """``needle in text``, every occurrence checked by ``verify`` against ``plain`` (default ``text``)."""
    if verify is None:
        return needle in text
    at = text.find(needle)
    while at >= 0:
        if verify(text if plain is None else plain, at):
            return True
        at = text.find(needle, at + 1)
    return False


class TextIndex:
    """Messages' texts in one form, joined once, searchable per needle for the positions holding it."""

    def __init__(self, texts: list[str | None], plain: list[str | None] | None = None):
        # A None text is left out of the index (a message no event shows): never found.
        self.ids = [i for i, t in enumerate(texts) if t is not None]
        self.texts = [texts[i] for i in self.ids]
        self.plain = self.texts if plain is None else [plain[i] for i in self.ids]
        self.starts: list[int] = []
        pos = 0
        for t in self.texts:
            self.starts.append(pos)
            pos += len(t) + 1
        self.joined = SEP.join(self.texts)
        self._lines: _Lines | None = None  # built on the first needle positions() looks for

    def _holding(self, needle: str, verify: Verify | None) -> Iterator[int]:
        """Each text (its index in ``self.texts``) holding ``needle`` with ``verify`` holding at
        an occurrence, in order, once; found by one scan of the joined texts."""
        if not needle or SEP in needle:
            yield from (i for i, t in enumerate(self.texts) if contains(t, needle, verify, self.plain[i]))
            return
        joined, starts, n = self.joined, self.starts, len(self.texts)
        at = joined.find(needle)
        while at >= 0:
            i = bisect_right(starts, at) - 1
            if verify is None or verify(self.plain[i], at - starts[i]):
                yield i
                if i + 1 >= n:
                    return
                at = joined.find(needle, starts[i + 1])  # one hit per message is enough
            else:
                at = joined.find(needle, at + 1)

    def positions(self, needle: str, verify: Verify | None = None) -> frozenset[int]:
        """Positions (in the list given) of the texts that contain ``needle`` (with ``verify``
        holding at an occurrence)."""
        ids = self.ids
        if needle.splitlines() != [needle]:  # a line break in it, as splitlines() sees it
            return frozenset(ids[i] for i in self._holding(needle, verify))
        return frozenset([ids[i] for i in self._holding_line(needle, verify)])

    def _holding_line(self, needle: str, verify: Verify | None) -> list[int]:
        """:meth:`_holding` for a needle without a line break: found in the texts' distinct lines.

        An occurrence of such a needle lies within one line, so the texts holding it are those
        holding a line that holds it. A session's texts repeat their lines (tool output shown
        again, the same file read twice: its distinct lines are about a ninth of its text), so
        each needle is searched in the distinct lines once, and only the texts holding one of the
        lines found are read, for ``verify`` at the needle's occurrences there."""
        if self._lines is None:
            self._lines = _Lines(self.texts)
        found = self._lines.texts_holding(needle)
        if verify is None:
            return found
        texts, plain = self.texts, self.plain
        return [i for i in found if contains(texts[i], needle, verify, plain[i])]

    def any(self, needle: str, verify: Verify | None = None) -> bool:
        """Whether any text contains ``needle`` (probes ask this of an event's few fresh
        messages for hundreds of needles)."""
        return next(self._holding(needle, verify), None) is not None


class _Lines:
    """The distinct lines (``str.splitlines()``) of a list of texts, each with the texts holding it."""

    def __init__(self, texts: list[str]):
        holders: defaultdict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(texts):
            for line in set(t.splitlines()):
                holders[line].append(i)
        self.holders = list(holders.values())
        self.starts: list[int] = []
        pos = 0
        for line in holders:
            self.starts.append(pos)
            pos += len(line) + 1
        self.joined = "\n".join(holders)  # no line holds a line break

    def texts_holding(self, needle: str) -> list[int]:
        """The texts (in order) holding a line that holds ``needle`` (which holds no line break)."""
        joined, starts, holders = self.joined, self.starts, self.holders
        out: set[int] = set()
        last = len(starts) - 1
        at = joined.find(needle)
        while at >= 0:
            k = bisect_right(starts, at) - 1
            out.update(holders[k])
            if k == last:
                break
            at = joined.find(needle, starts[k + 1])
        return sorted(out)
