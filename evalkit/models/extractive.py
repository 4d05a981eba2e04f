"""The offline deterministic summarizer: extractive summarization into the requested template.

It is a real (if simple) compaction strategy, not a model: it copies lines it can recognise
(the latest test tally, error lines, user constraint lines, file paths, the last user request)
into the template's sections. Every output carries a first line naming it as the offline
stand-in, so no report can mistake it for a model's summary.
"""

from __future__ import annotations

import re

from evalkit.models.request import ChatRequest, ChatResponse

LABEL = "[offline extractive summary: evalkit stand-in, not a model]"
_HEADING = re.compile(r"^#{2,3} .+$", re.M)
_TALLY = re.compile(r"\b\d+ (?:passed|failed|passing|failing)\b|test result:|Tests:\s|Ran \d+ tests", re.I)
_ERROR = re.compile(r"\b(?:error|exception|traceback|fatal|failed)\b", re.I)
_PATH = re.compile(r"\b[\w./-]+\.(?:py|ts|js|rs|go|md|toml|json|rb|php|java|c|h|rst|txt)\b")


def _template_headings(system: str) -> list[str]:
    return _HEADING.findall(system) or ["## Goal", "## Progress", "## Next Steps"]


# Every alternative of _TALLY / _ERROR contains one of these (case-folded), so a line that
# holds none of them cannot match: substring scans find the few candidate lines cheaply.
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_NEEDLES = {
    "tally": ("passed", "failed", "passing", "failing", "test result:", "tests:", "ran "),
    "error": ("error", "exception", "traceback", "fatal", "failed"),
}


def _last_matching(pattern: re.Pattern, lines: list[str], n: int, convo: str = "", kind: str = "") -> list[str]:
    """The last ``n`` stripped lines matching, in order (same result as testing every line)."""
    low = convo.lower()
    # The fast path splits on "\n" only; splitlines() also splits on these, so fall back then.
    if kind and len(low) == len(convo) and not _OTHER_BREAKS.search(convo):
        starts: set[int] = set()
        for needle in _NEEDLES[kind]:
            i = low.find(needle)
            while i >= 0:
                starts.add(low.rfind("\n", 0, i) + 1)
                end = low.find("\n", i)
                i = low.find(needle, end) if end >= 0 else -1
        found: list[str] = []
        for start in sorted(starts, reverse=True):
            end = convo.find("\n", start)
            ln = convo[start : end if end >= 0 else len(convo)].strip()
            if ln and pattern.search(ln):
                found.append(ln)
                if len(found) == n:
                    break
        return found[::-1]
    found = []
    for ln in reversed(lines):
        if pattern.search(ln):
            found.append(ln)
            if len(found) == n:
                break
    return found[::-1]


def summarize(request: ChatRequest) -> ChatResponse:
    """Fill the template headings found in the system prompt from the conversation text."""
    system = "\n".join(m["content"] for m in request.messages if m["role"] == "system")
    convo = "\n".join(m["content"] for m in request.messages if m["role"] != "system")
    lines = [ln.strip() for ln in convo.splitlines() if ln.strip()]
    tallies = _last_matching(_TALLY, lines, 3, convo, "tally")
    errors = _last_matching(_ERROR, lines, 5, convo, "error")
    users = [ln[len("User:") :].strip() for ln in lines if ln.startswith("User:")]
    paths = sorted(set(_PATH.findall(convo)))[:20]
    fill = {
        "goal": users[:1],
        "constraint": [
            u for u in users if re.search(r"\b(never|don'?t|do not|must|always|only|keep)\b", u, re.I)
        ],
        "progress": tallies,
        "done": tallies,
        "error": errors,
        "decision": [],
        "next": users[-1:],
        "context": paths,
        "file": paths,
    }
    out = [LABEL]
    for h in _template_headings(system):
        key = next((k for k in fill if k in h.lower()), None)
        body = fill.get(key, []) if key else []
        out.append(h)
        out.extend(f"- {b[:300]}" for b in body or ["(none found)"])
    text = "\n".join(out)
    if request.max_tokens:
        text = text[: request.max_tokens * 4]
    return ChatResponse(text=text, backend="extractive", model=request.model)


def _factory(settings: dict):
    return summarize


from evalkit.models.backends import BACKENDS  # noqa: E402

BACKENDS.add(
    "extractive",
    _factory,
    "deterministic offline extractive summarizer (a labelled stand-in)",
    offline_standin=True,
)
