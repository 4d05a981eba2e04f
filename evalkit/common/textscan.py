"""Finding the lines of long texts worth a regex: substring scans first, patterns second.

Case-insensitive regex alternations are slow over 40 KB tool outputs; ``str.find`` on the
lower-cased text is not. Callers that look for lines matching a pattern whose every match holds
one of a few literal words (a tally, an error) first narrow the text to the lines holding one.
"""

from __future__ import annotations


def lines_with(text: str, needles: tuple[str, ...], lowered: str | None = None) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text`` holding one of the lower-case ``needles``, in order,
    once each. ``lowered`` is ``text.lower()`` when the caller already has it."""
    low = text.lower() if lowered is None else lowered
    if len(low) != len(text):  # a case mapping that changes length ("İ"): offsets would drift
        low = text
    starts: set[int] = set()
    for needle in needles:
        i = low.find(needle)
        while i >= 0:
            starts.add(low.rfind("\n", 0, i) + 1)
            end = low.find("\n", i)
            if end < 0:
                break
            i = low.find(needle, end)
    spans = []
    for start in sorted(starts):
        end = text.find("\n", start)
        spans.append((start, len(text) if end < 0 else end))
    return spans
