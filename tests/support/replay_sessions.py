"""Constructed sessions for the replay tests: small, exact, and built to force compactions."""

from __future__ import annotations

from evalkit.contracts.session import Compaction, Message, Session, Source, Text, ToolCall, ToolResult
from evalkit.models import ChatRequest, ChatResponse


class Builder:
    """Appends messages with stable ids; ``tool`` adds an assistant call and its result."""

    def __init__(self, sid: str = "t", meta: dict | None = None):
        self.sid = sid
        self.messages: list[Message] = []
        self.meta = meta or {}
        self.calls = 0
        self.add("system", [Text("You are a coding agent.")])

    def add(self, role: str, blocks: list) -> Message:
        m = Message(f"{self.sid}:m{len(self.messages):04d}", role, blocks)  # type: ignore[arg-type]
        self.messages.append(m)
        return m

    def user(self, text: str) -> Message:
        return self.add("user", [Text(text)])

    def say(self, text: str) -> Message:
        return self.add("assistant", [Text(text)])

    def tool(self, name: str, args: dict, output: str, is_error: bool = False) -> Message:
        self.calls += 1
        cid = f"c{self.calls}"
        self.add("assistant", [ToolCall(cid, name, args)])
        return self.add("tool", [ToolResult(cid, output, is_error, 1 if is_error else 0)])

    def recorded_compaction(self, summary: str = "recorded summary") -> Message:
        return self.add("user", [Compaction(summary, 100, 10)])

    def session(self) -> Session:
        return Session(self.sid, Source("test"), self.messages, self.meta)


def filler_turns(b: Builder, n: int, chars: int = 1_200, tag: str = "step", nudge: bool = True) -> None:
    """``n`` ordinary turns: a bash call with ``chars`` of output, a user nudge every 4th."""
    for k in range(n):
        line = f"{tag} {k}: src/mod_{k % 7}.py line {k} ok\n"
        b.tool("Bash", {"command": f"run {tag} {k}"}, (line * (chars // len(line) + 1))[:chars])
        if nudge and k % 4 == 3:
            b.user(f"Keep going with {tag} {k}.")


def echo_all(request: ChatRequest) -> ChatResponse:
    """A summarizer that returns everything it was shown, ignoring max_tokens."""
    return ChatResponse(text=request.messages[-1]["content"], backend="echo", model=request.model)


def stacking(request: ChatRequest) -> ChatResponse:
    """Seed 004's summarizer: it reproduces the prior summary it was handed verbatim and adds a
    short digest (the first 400 chars) of the new material, ignoring max_tokens."""
    text = request.messages[-1]["content"]
    tag = "<new-activity>\n" if "<new-activity>\n" in text else "<conversation>\n"
    at = text.rindex(tag) + len(tag)
    return ChatResponse(text=text[: at + 400], backend="stacking", model=request.model)


def fixed(text: str):
    """A summarizer that always answers ``text``."""

    def client(request: ChatRequest) -> ChatResponse:
        return ChatResponse(text=text, backend="fixed", model=request.model)

    return client
