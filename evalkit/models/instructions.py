"""What a summarizer request asks of the summary beyond its sections: a length target, per-section
caps and requests to keep kinds of lines as they are (read from the instructions only, never from
the quoted conversation)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from evalkit.models.request import ChatRequest

_LIMIT = re.compile(
    r"\b(?:at most|under|no more than|within|max(?:imum)?|about|around|roughly|approximately|"
    r"target(?:ing)?(?: about| around)?)\s+~?(\d[\d,]*)\s+(tokens|words)\b",
    re.I,
)
_CAP = re.compile(r"([A-Z][\w &/'-]*?)\s+(\d+)\s+(bullets?|items?|sentences?|lines?|points?)\b")
_KEEP = re.compile(r"\b(?:keep|preserve|quote|retain)\b([^.]*)", re.I)


@dataclass(frozen=True)
class Instructions:
    """What the request asks of the summary beyond its sections."""

    budget_tokens: int | None
    caps: tuple[tuple[str, int], ...]  # (lower-case section name, items)
    keep_whole: frozenset[str]  # item kinds to copy as they are: all, path, command, outcome, failure


def _instruction_text(request: ChatRequest) -> str:
    """The system prompt and what follows the quoted conversation: a user in the transcript asking
    for "at most 100 words" is not talking to the summarizer."""
    texts = []
    for m in request.messages:
        c = str(m.get("content") or "")
        texts.append(c if m.get("role") == "system" else c[c.rfind("</") :] if "</" in c else c)
    return "\n".join(texts)


def read_instructions(request: ChatRequest) -> Instructions:
    """Length target, per-section caps and keep-as-is requests stated in the instructions."""
    text = _instruction_text(request)
    budgets = [request.max_tokens] if request.max_tokens else []
    for n, unit in _LIMIT.findall(text):
        v = int(n.replace(",", ""))
        budgets.append(v if unit.lower() == "tokens" else math.ceil(v * 4 / 3))
    caps = tuple((name.strip().lower().removeprefix("each "), int(k)) for name, k, _ in _CAP.findall(text))
    keep: set[str] = set()
    for m in _KEEP.finditer(text):
        what = m.group(1).lower()
        keep |= {"all"} if "verbatim" in what or "exact" in what else set()
        keep |= {"path"} if "path" in what or "file" in what else set()
        keep |= {"command"} if "command" in what else set()
        keep |= {"outcome"} if "result" in what or "output" in what else set()
        keep |= {"failure"} if "error" in what or "fail" in what else set()
    return Instructions(min(budgets) if budgets else None, caps, frozenset(keep))


def length_target(request: ChatRequest) -> int | None:
    """The token budget: ``max_tokens``, tightened by a stated length target."""
    return read_instructions(request).budget_tokens


def section_cap(heading: str, parent: str | None, caps: tuple[tuple[str, int], ...]) -> int | None:
    name = heading.split(" ", 1)[1].lower()
    for cap_name, k in caps:
        base = cap_name.removesuffix(" subsection").removesuffix(" subsections")
        if cap_name.endswith(("subsection", "subsections")):
            if parent and base in parent.lower():
                return k
        elif base == name or (len(base) >= 4 and name.startswith(base)):
            return k
    return None
