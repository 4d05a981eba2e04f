"""Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl`` and sub-agent files).

One file is one session. Assistant lines split per content block are merged by ``message.id``;
``tool_result`` blocks become tool messages; ``compact_boundary`` + the ``isCompactSummary`` user
line become one :class:`Compaction`; command wrappers, reminders, meta lines and interruption
notices are synthetic text. Title ``summary`` lines become ``meta.title``; progress, snapshots,
attachments, queue operations and system notices are skipped and counted. Sub-agent files
(``isSidechain``) are their own sessions with ``meta.parent_session``. The file is read in file
order (the ``parentUuid`` tree is not walked), which is the order the lines were appended; a
line whose ``uuid`` was already read (a resumed session's file repeats the old conversation) is
skipped and counted, so nothing is imported twice.
"""

from __future__ import annotations

import re

from evalkit.contracts.session import Compaction, Text, Thinking, ToolCall, ToolResult
from evalkit.importers import Importer, register
from evalkit.importers.building import SessionBuilder, as_text, exit_code_from_text, short_id
from evalkit.importers.inputs import ImportReport, Probe, jsonl_records

ENTRY_TYPES = {
    "user",
    "assistant",
    "system",
    "summary",
    "attachment",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "last-prompt",
    "permission-mode",
    "custom-title",
    "tag",
    "agent-name",
}
SKIPPED_TYPES = ENTRY_TYPES - {"user", "assistant", "system", "summary"}

# Text the CLI writes into user turns itself: slash-command wrappers, local command output,
# reminders, caveats, interruption notices and a background task's result (``<task-notification>``,
# a sub-agent's output delivered as a user turn). None of it is a user instruction.
_SYNTHETIC = re.compile(
    r"^\s*(?:<command-(?:name|message|args)>|<local-command-(?:stdout|stderr)>|<system-reminder>|<task-notification>|"
    r"<user-prompt-submit-hook>|<bash-(?:input|stdout|stderr)>|Caveat: The messages below were generated|"
    r"\[Request interrupted by user)"
)


def detect(probe: Probe) -> bool:
    recs = probe.first_records(8)
    return any(
        isinstance(r.get("type"), str)
        and r["type"] in ENTRY_TYPES
        and ("sessionId" in r or "leafUuid" in r or "uuid" in r)
        and "payload" not in r
        for r in recs
    )


def _is_synthetic(entry: dict, text: str) -> bool:
    return bool(entry.get("isMeta")) or bool(_SYNTHETIC.match(text))


def read(probe: Probe, report: ImportReport, options: dict):
    path = probe.path
    b: SessionBuilder | None = None
    pending_boundary: dict | None = None
    sidechain_file: bool | None = None
    last_msg_id: str | None = None  # message.id of the last assistant message built

    def builder(entry: dict) -> SessionBuilder:
        nonlocal b, sidechain_file
        if b is None:
            sidechain_file = bool(entry.get("isSidechain"))
            sid = entry.get("sessionId") if isinstance(entry.get("sessionId"), str) else short_id(path.stem)
            meta: dict = {
                "cwd": entry.get("cwd"),
                "version": entry.get("version"),
                "git_branch": entry.get("gitBranch"),
            }
            if sidechain_file:
                agent = entry.get("agentId") or path.stem.split("agent-")[-1]
                meta.update(parent_session=sid, agent_id=agent, sidechain=True)
                sid = f"{sid}/agent-{short_id(str(agent))}"
            b = SessionBuilder(
                report, "claude-code", path, sid, meta={k: v for k, v in meta.items() if v is not None}
            )
        return b

    def flush_boundary(line: int) -> None:
        nonlocal pending_boundary
        if pending_boundary is not None:
            md = pending_boundary.get("compactMetadata") or {}
            builder(pending_boundary).add(
                "user",
                [
                    Compaction(
                        "",
                        _int(md.get("preTokens")),
                        _int(md.get("postTokens")),
                        str(md.get("trigger") or "auto"),
                    )
                ],
                line,
                {"synthetic": True},
            )
            pending_boundary = None

    title = None
    seen: set[str] = set()  # record uuids: a resumed session's file repeats its old prefix
    for n, e in jsonl_records(path, report):
        t = e.get("type")
        if not isinstance(t, str) or t not in ENTRY_TYPES:
            report.problem(path, n, f"unknown entry type {t!r}; skipped", key="unknown entry type")
            continue
        uid = e.get("uuid")
        if isinstance(uid, str) and t in ("user", "assistant", "system"):
            if uid in seen:
                report.skip(path, n, "claude-code line repeated (resumed session; same uuid)")
                continue
            seen.add(uid)
        if t == "summary":
            if isinstance(e.get("summary"), str):
                title = e["summary"]
            continue
        if t in SKIPPED_TYPES:
            report.skip(path, n, f"claude-code {t} line")
            continue
        if t == "system":
            if e.get("subtype") == "compact_boundary":
                flush_boundary(n)
                pending_boundary = e
                builder(e)
            else:
                report.skip(path, n, f"claude-code system/{e.get('subtype') or 'notice'} line")
            continue
        if b is not None and e.get("isSidechain") and not sidechain_file:
            report.skip(path, n, "claude-code sidechain line in a main session")
            continue
        msg = e.get("message")
        if not isinstance(msg, dict):
            report.problem(path, n, f"{t} line without a message object; skipped", key="missing message")
            continue
        sb = builder(e)
        content = msg.get("content")
        if t == "user":
            if e.get("isCompactSummary"):
                md = (pending_boundary or {}).get("compactMetadata") or {}
                pending_boundary = None
                sb.add(
                    "user",
                    [
                        Compaction(
                            as_text(content),
                            _int(md.get("preTokens")),
                            _int(md.get("postTokens")),
                            str(md.get("trigger") or "auto"),
                        )
                    ],
                    n,
                    {"synthetic": True},
                )
                continue
            flush_boundary(n)
            if _user(sb, e, content, n):
                last_msg_id = None  # a user turn ends the response; tool results do not
        else:
            flush_boundary(n)
            last_msg_id = _assistant(sb, e, msg, n, last_msg_id)
    if b is None:
        report.problem(path, 0, "no user or assistant lines", key="empty session")
        return
    flush_boundary(0)
    if title:
        b.meta["title"] = title
    s = b.finish()
    if s:
        yield s


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _user(sb: SessionBuilder, e: dict, content, n: int) -> bool:
    """Add a user line's tool results and text; True when it added user text."""
    if isinstance(content, str):
        return sb.text("user", content, n, synthetic=_is_synthetic(e, content)) is not None
    if not isinstance(content, list):
        sb.report.problem(
            sb.path, n, "user message content is neither text nor a list; skipped", key="malformed content"
        )
        return False
    texts = []
    for blk in content:
        if not isinstance(blk, dict):
            continue
        kind = blk.get("type")
        if kind == "tool_result":
            out = as_text(blk.get("content"))
            is_err = bool(blk.get("is_error"))
            code = exit_code_from_text(out) if is_err else None
            if (
                code is None
                and isinstance(e.get("toolUseResult"), dict)
                and e["toolUseResult"].get("interrupted")
            ):
                is_err = True
            sb.add("tool", [ToolResult(str(blk.get("tool_use_id", "")), out, is_err, code)], n)
        elif kind == "text" and isinstance(blk.get("text"), str):
            texts.append(Text(blk["text"], _is_synthetic(e, blk["text"])))
        elif kind in ("image", "document"):
            texts.append(Text(f"[{kind}]", True))
    if texts:
        sb.add("user", texts, n)
    return bool(texts)


def _assistant(sb: SessionBuilder, e: dict, msg: dict, n: int, last_id: str | None) -> str | None:
    content = msg.get("content")
    blocks = []
    synthetic = bool(e.get("isApiErrorMessage")) or msg.get("model") == "<synthetic>"
    for blk in content if isinstance(content, list) else [{"type": "text", "text": as_text(content)}]:
        if not isinstance(blk, dict):
            continue
        kind = blk.get("type")
        if kind == "text" and isinstance(blk.get("text"), str) and blk["text"].strip():
            blocks.append(Text(blk["text"], synthetic))
        elif kind == "thinking" and isinstance(blk.get("thinking"), str) and blk["thinking"].strip():
            blocks.append(Thinking(blk["thinking"]))
        elif kind == "tool_use" and isinstance(blk.get("id"), str):
            args = blk.get("input")
            blocks.append(
                ToolCall(
                    blk["id"], str(blk.get("name", "")), args if isinstance(args, dict) else {"input": args}
                )
            )
    mid = msg.get("id") if isinstance(msg.get("id"), str) else None
    prev = sb.last("assistant")
    if mid and mid == last_id and prev is not None:
        prev.blocks.extend(blocks)  # one API response split over several lines
        return mid
    if blocks:
        meta = {"model": msg["model"]} if isinstance(msg.get("model"), str) and not synthetic else {}
        if synthetic:
            meta["synthetic"] = True
        sb.add("assistant", blocks, n, meta)
        return mid
    return last_id


IMPORTER = register(
    Importer(
        "claude-code",
        "Claude Code session JSONL (~/.claude/projects/*/*.jsonl, sub-agent files as linked sessions)",
        detect,
        read,
    )
)
