"""The splice and carry steps: the new context after a compaction (the summary message, the
texts carried verbatim, the kept tail) and the accounting of what left the view."""

from __future__ import annotations

from evalkit.contracts.session import Message, Text, message_chars
from evalkit.models import ChatRequest
from evalkit.replay.job import (
    CARRY_FILES_META,
    FILES_META,
    SUMMARY_META,
    UNSEEN_META,
    USERS_META,
    Outcome,
    Pass,
)
from evalkit.replay.prompt import PromptBuilder

SPLICE_PREFIX = "[Earlier conversation compacted to save context]\n\nCompacted from {n} tokens\n\n"


def splice_default(p: Pass, summary: str, tokens_before: int) -> tuple[str, dict]:
    """The reference splice: a banner naming the tokens compacted, then the summary."""
    return SPLICE_PREFIX.format(n=tokens_before) + summary, {}


def first_and_latest_three(previous: list[str], new: list[str]) -> list[str]:
    """The reference user carry: the session's first user message and its latest three."""
    users = previous + new
    return users[:1] + users[1:][-3:]


def carry_files(p: Pass) -> dict[str, list[str]]:
    """Deterministic carry of files read and modified (paths only), accumulated across rounds."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for m in p.leaving_made:
        for k, v in m.meta.get(FILES_META, {}).items():
            (read if k == "read" else modified).update(dict.fromkeys(v))
    files = p.job.renders.files
    for m, _, _ in p.taken:
        r, w = files(m)
        if r:  # most messages of a head read and modify nothing
            read.update(dict.fromkeys(r))
        if w:
            modified.update(dict.fromkeys(w))
    return {"read": [f for f in read if f not in modified], "modified": list(modified)}


def files_block(files: dict[str, list[str]]) -> str:
    out = []
    for tag, key in (("read-files", "read"), ("modified-files", "modified")):
        if files[key]:
            out.append(f"<{tag}>\n" + "\n".join(files[key]) + f"\n</{tag}>")
    return "\n\n".join(out)


def splice_and_carry(p: Pass, request: ChatRequest, prompt: PromptBuilder) -> Outcome:
    """The new context: system, the summary message (plugin carry first), the user carry, the tail."""
    job, pol = p.job, p.policy
    tokens_before = job.tokens_in_context()
    files = carry_files(p)
    banner, provenance = pol.splice(p, p.summary, tokens_before)
    plugin = pol.carry_hook(p) if pol.carry_hook else []
    blocks = [Text(t) for t in plugin]
    text = banner + (("\n\n" + files_block(files)) if files["read"] or files["modified"] else "")
    blocks.append(Text(text))
    made = [
        Message(
            f"evalkit:r{job.round}:summary",
            "user",
            blocks,  # type: ignore[arg-type]
            {SUMMARY_META: p.summary, FILES_META: files, CARRY_FILES_META: p.plugin_texts, **provenance},
        )
    ]
    # Each carried text remembers how much of its message no summarizer saw in full (a seed-003
    # stub): that part is lost only when the text later drops out of the carry.
    prev = [
        (u, n)
        for m in p.leaving_made
        for u, n in zip(m.meta.get(USERS_META, []), m.meta.get(UNSEEN_META, []), strict=False)
    ]
    new = [(m.text, message_chars(m) - r.shown - r.elided) for m, r, _ in p.taken if m.is_genuine_user()]
    users = pol.carry_users([u for u, _ in prev], [u for u, _ in new])
    unseen = [next((n for t, n in [*prev, *new] if t.startswith(u)), 0) for u in users]
    deferred = sum(n for t, n in prev if not any(t.startswith(u) for u in users))
    if users:
        made.append(
            Message(
                f"evalkit:r{job.round}:users",
                "user",
                [Text("<user-requests>\n" + "\n\n".join(users) + "\n</user-requests>")],
                {USERS_META: users, UNSEEN_META: unseen},
            )
        )
    carried = [*plugin, *users]
    accounting = {m.id: (r.shown, r.elided) for m, r, _ in p.taken}
    carried_set = set(carried)
    for m, _, _ in p.taken if carried_set else ():
        # Carried verbatim is not lost, whatever the summarizer saw of it.
        if (m.is_genuine_user() and m.text in carried_set) or any(
            r.output in carried_set for r in m.tool_results()
        ):
            accounting[m.id] = (message_chars(m), 0)
    return Outcome(
        p.system + made + p.tail,
        p.summary,
        None,
        request,
        prompt.parts,
        carried,
        accounting,
        p.source_chars,
        {"provenance": provenance} if provenance else {},
        deferred_lost=deferred,
    )
