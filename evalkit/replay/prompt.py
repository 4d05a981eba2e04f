"""The prompt step: the summarizer's instructions (the reference template and guidance, or a
candidate's) and the user prompt, built as text and, in step, as the parts an event stores."""

from __future__ import annotations

from typing import Any

from evalkit.common.templates import REFERENCE_TEMPLATE
from evalkit.contracts.session import Message
from evalkit.replay.job import SUMMARY_META, Pass, is_made
from evalkit.replay.render import Rendered

# A step receives the arm's evalkit.replay.compactor.Policy, typed Any here: the compactor imports
# this module, and importing it back (even for type checking) would make a cycle.
Policy = Any

TEMPLATE = REFERENCE_TEMPLATE
GUIDANCE = "Number the Next Steps. Be specific: keep file paths, commands, test results and error messages."
FIRST_PROMPT = "Summarize the conversation above."
UPDATE_PROMPT = "Update the summary with the new activity; preserve all existing information."


def system_prompt(template: tuple[str, ...], guidance: str, extra: tuple[str, ...] = ()) -> str:
    """The summarizer's instructions: the section template, guidance, then any candidate lines."""
    lines = [
        "You are compacting a coding agent's conversation so it can continue with less context. "
        "Write a structured summary with exactly these sections, in this order:",
        "",
        "\n".join(template),
        "",
        guidance,
        *extra,
    ]
    return "\n".join(lines)


# The baseline's instructions, as sent (other modules and tests quote it).
SYSTEM_PROMPT = system_prompt(TEMPLATE, GUIDANCE)
# request_layout = "prefix": one system message for every arm; each arm's instructions follow
# the conversation in the user message (docs/models.md, "Prefix-cache-aware requests").
PREFIX_SYSTEM = (
    "You are compacting a coding agent's conversation so it can continue with less context. "
    "The conversation comes first; your instructions follow it."
)


def instructions_of(policy: Policy) -> str:
    """An arm's summarizer instructions: the system message, or with the prefix layout the
    ``<instructions>`` block after the conversation."""
    return system_prompt(policy.template, policy.guidance, policy.instructions)


def previous_in_full(p: Pass) -> str | None:
    """The earlier summary, as the incremental update hands it back to the summarizer."""
    return p.previous.meta[SUMMARY_META] if p.previous is not None else None


class PromptBuilder:
    """Builds the user prompt as text and, in step, as compact parts: literals and spans of
    rendered recorded messages, so events store the exact request without copying it
    (``evalkit.replay.requests`` rebuilds it)."""

    def __init__(self, order: dict[str, int]) -> None:
        self.order = order  # session index of each recorded message
        self.chunks: list[str] = []
        self.parts: list[Any] = []

    def lit(self, s: str) -> None:
        self.chunks.append(s)
        if self.parts and isinstance(self.parts[-1], str):
            self.parts[-1] += s
        else:
            self.parts.append(s)

    def messages(self, items: list[tuple[Message, Rendered, int | None]], variant: str) -> None:
        """Renders joined by blank lines; consecutive session messages become one span."""
        for j, (m, r, room) in enumerate(items):
            last = self.parts[-1] if self.parts else None
            at = self.order.get(m.id)
            if (
                j
                and room is None
                and isinstance(last, dict)
                and "span" in last
                and last["as"] == variant
                and at is not None
                and at == self.order[last["span"][1]] + 1
            ):
                self.chunks.append("\n\n" + r.text)
                last["span"][1] = m.id
                continue
            if j:
                self.lit("\n\n")
            if at is None:  # not a recorded message: its render is stored as a literal
                self.lit(r.text)
                continue
            self.chunks.append(r.text)
            if room is not None:
                self.parts.append({"stub": m.id, "as": variant, "room": room})
            else:
                self.parts.append({"span": [m.id, m.id], "as": variant})

    def text(self) -> str:
        return "".join(self.chunks)


def build_prompt(p: Pass) -> PromptBuilder:
    """``<conversation>`` (or ``<previous-summary>`` + ``<new-activity>``), then, for the
    ``retained`` candidate, the kept tail in ``<retained>``, then the instruction. With
    ``request_layout = "prefix"``: ``<new-activity>`` before ``<previous-summary>``, and the arm's
    instructions in ``<instructions>`` before the closing instruction."""
    b, pol = PromptBuilder(p.job.order), p.policy
    prefix = p.job.settings.request_layout == "prefix"
    prev = pol.previous(p)
    if prev is not None and not prefix:
        b.lit(f"<previous-summary>\n{prev}\n</previous-summary>\n<new-activity>\n")
    else:
        b.lit("<new-activity>\n" if prev is not None else "<conversation>\n")
    b.messages(p.taken, pol.renderer)
    b.lit("\n</new-activity>\n\n" if prev is not None else "\n</conversation>\n\n")
    if prev is not None and prefix:
        # The new activity is often the same for every arm (the cut is measured from the end);
        # each arm's earlier summary is its own, so it follows.
        b.lit(f"<previous-summary>\n{prev}\n</previous-summary>\n\n")
    if pol.retained:
        kept = [(m, p.job.renders.get(m, pol.renderer), None) for m in p.tail if not is_made(m)]
        b.lit("<retained>\n")
        b.messages(kept, pol.renderer)
        b.lit(
            "\n</retained>\n\nThe <retained> messages stay in context verbatim after the summary: do not "
            "summarize them, but write Progress and Next Steps as the state after them.\n"
        )
    if prefix:
        b.lit(f"<instructions>\n{instructions_of(pol)}\n</instructions>\n\n")
    b.lit(UPDATE_PROMPT if prev is not None else FIRST_PROMPT)
    return b
