"""The offline judge's reading of a session's messages, shared by the exam judge and the recovery
arm's search (:mod:`evalkit.score.judge`, :mod:`evalkit.score.recovery`): each message indexed
once per session, whichever of them reads it first."""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.models import offline_judge
from evalkit.score.base import ProbeInput


class SessionContext(offline_judge.Context):
    """Messages as the offline judge reads them, each indexed once per session: a message's
    lower-cased text, its passages, and each question's term counts in both are cached under the
    message's key in the session's cache (kept messages recur across events and arms, and the
    recovery arm searches the same removed messages at many events). A key names one text: a
    recorded message's id (a masked copy has its own id), else the speaker and text. The cache is
    one plain dict (this runs per message per question)."""

    def __init__(self, keys: tuple, messages: Sequence[str], cache: dict):
        super().__init__(messages)
        self.keys = keys  # also the context's part of the key its answers are memoized under
        self.cache = cache

    def _get(self, i: int, kind, fn):
        key = (self.keys[i], kind)
        v = self.cache.get(key)
        if v is None:
            v = self.cache[key] = fn()
        return v

    def counts(self, question: str) -> list[dict[str, int]]:
        # question -> message key -> term counts (the cache's one key that is not a tuple): the
        # lookup per message builds no tuple
        by_question = self.cache.setdefault("counts", {})
        known = by_question.get(question)
        if known is None:
            known = by_question[question] = {}
        out = list(map(known.get, self.keys))
        for i, tf in enumerate(out):
            if tf is None:
                low = self._get(i, "low", lambda i=i: self.text(i).lower())
                tf = out[i] = known[self.keys[i]] = offline_judge.counts(question, low)
        return out

    def passages(self, i: int) -> list[offline_judge.Passage]:
        return self._get(i, "passages", lambda: offline_judge.passages(self.text(i)))

    def passage_counts(self, question: str, i: int) -> list[dict[str, int]]:
        return self._get(
            i, ("passages", question), lambda: super(SessionContext, self).passage_counts(question, i)
        )


def session_cache(inp: ProbeInput) -> dict:
    """The offline judge's per-session cache (see :class:`SessionContext`)."""
    return inp.view.extras.setdefault("offline_judge", {})
