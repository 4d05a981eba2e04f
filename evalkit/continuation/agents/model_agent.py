"""The ``openai`` agent: a real model acting from the compacted context, through the model layer.

The compacted context becomes the conversation (tool calls and results as OpenAI function-call
messages), followed by the harness's continue message; the model gets bash/read/edit/write as
function tools, named as the session named them where the recording used a compatible tool
(so ``Bash`` stays ``Bash``). Each tool call it makes is answered by the replay environment.
Every request goes through ``evalkit.models.make_client`` (the one seam: cached, replicated);
the agent depends only on that callable, ``client(ChatRequest) -> ChatResponse``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from evalkit.common.toolcalls import classify
from evalkit.continuation.agents import AGENTS, ContinuationInput, Step, Transcript
from evalkit.continuation.environment import ReplayEnvironment
from evalkit.contracts.config import ContinuationConfig, ModelConfig
from evalkit.contracts.session import Compaction, Message, Text, ToolCall
from evalkit.models import ChatRequest

CONTINUE_MESSAGE = (
    "The conversation above was compacted to free context. Carry on with the task from where it "
    "stopped, without asking the user anything. When the work is finished, stop calling tools and "
    "say that you are done."
)

_STRING = {"type": "string"}
# kind -> (standard name, description, properties); the replay environment understands these
# argument keys whatever the tool's name.
STANDARD_TOOLS = {
    "shell": ("bash", "Run a shell command in the repository.", {"command": _STRING}),
    "read": ("read", "Read a file.", {"file_path": _STRING}),
    "edit": (
        "edit",
        "Replace old_string with new_string in a file.",
        {"file_path": _STRING, "old_string": _STRING, "new_string": _STRING},
    ),
    "write": ("write", "Write a whole file.", {"file_path": _STRING, "content": _STRING}),
}
# The op each kind must classify as (``classify``), besides taking the standard argument keys.
_OP_KIND = {"shell": "shell", "read": "read", "edit": "modify", "write": "modify"}


def compatible_kind(call: ToolCall) -> str | None:
    """The standard kind whose schema a recorded call fits (its op and argument keys), if any."""
    args = call.args if isinstance(call.args, dict) else {}
    op = classify(call).kind
    for kind, (_, _, props) in STANDARD_TOOLS.items():
        if op == _OP_KIND[kind] and set(props) <= set(args) and set(args) - {"description"} <= set(props):
            return kind
    return None


def tools_for(messages: list[Message]) -> tuple[dict[str, Any], ...]:
    """Function tools for a session: the standard four, each under the session's own name if it used one."""
    seen: dict[str, Counter] = {k: Counter() for k in STANDARD_TOOLS}
    for m in messages:
        for c in m.tool_calls():
            kind = compatible_kind(c)
            if kind is not None:
                seen[kind][c.name] += 1
    out = []
    for kind, (name, desc, props) in STANDARD_TOOLS.items():
        chosen = seen[kind].most_common(1)[0][0] if seen[kind] else name
        out.append(
            {
                "type": "function",
                "function": {
                    "name": chosen,
                    "description": desc,
                    "parameters": {"type": "object", "properties": props, "required": list(props)},
                },
            }
        )
    return tuple(out)


def _call_dict(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.args, ensure_ascii=False)},
    }


def to_chat(context: list[Message]) -> list[dict[str, Any]]:
    """The compacted context as OpenAI chat messages.

    Thinking is dropped (providers do not accept it back as text); a recorded compaction marker
    becomes user text; a tool result whose call is not in view, or a call never answered, is left
    out, because a provider rejects either.
    """
    answered = {r.call_id for m in context for r in m.tool_results()}
    in_view: set[str] = set()
    out: list[dict[str, Any]] = []
    for m in context:
        text = "\n".join(
            b.text if isinstance(b, Text) else b.summary for b in m.blocks if isinstance(b, Text | Compaction)
        )
        if m.role == "assistant":
            calls = [c for c in m.tool_calls() if c.id in answered]
            in_view.update(c.id for c in calls)
            if text or calls:
                msg: dict[str, Any] = {"role": "assistant", "content": text or None}
                if calls:
                    msg["tool_calls"] = [_call_dict(c) for c in calls]
                out.append(msg)
            continue
        for r in m.tool_results():
            if r.call_id in in_view:
                out.append({"role": "tool", "tool_call_id": r.call_id, "content": r.output})
        if text:
            out.append({"role": "system" if m.role == "system" else "user", "content": text})
    return out


def parse_tool_call(tc: dict[str, Any], k: int) -> ToolCall:
    """A response's tool call (``{"id", "name", "arguments"}`` or the OpenAI ``function`` shape) as a ToolCall."""
    fn = tc.get("function") or tc
    raw = fn.get("arguments", {})
    if isinstance(raw, str):
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            args = {"_unparsed_arguments": raw}
    else:
        args = dict(raw or {})
    if not isinstance(args, dict):
        args = {"_arguments": args}
    return ToolCall(str(tc.get("id") or f"agent-call-{k}"), str(fn.get("name", "")), args)


def run_model_agent(
    inp: ContinuationInput, env: ReplayEnvironment, client, model: str, max_tokens: int | None
) -> Transcript:
    """Loop: ask the model, answer its tool calls from the environment, until it stops or the budget ends."""
    messages = [*to_chat(inp.context), {"role": "user", "content": CONTINUE_MESSAGE}]
    tools = tools_for(inp.record.session.messages)
    steps: list[Step] = []
    while len(steps) < inp.max_calls:
        request = ChatRequest(
            model=model,
            messages=tuple(messages),
            tools=tools,
            max_tokens=max_tokens,
            replicate=inp.replicate,
            purpose="agent",
        )
        response = client(request)
        if response.error is not None:
            return Transcript(steps, False, f"model call {len(steps)}: {response.error}")
        if not response.tool_calls:
            return Transcript(steps, True)
        calls = [parse_tool_call(tc, len(steps) + k) for k, tc in enumerate(response.tool_calls)]
        calls = calls[: inp.max_calls - len(steps)]
        messages.append(
            {
                "role": "assistant",
                "content": response.text or None,
                "tool_calls": [_call_dict(c) for c in calls],
            }
        )
        for call in calls:
            op = classify(call)
            answer = env.answer(call, op)
            steps.append(Step(call, op, answer))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": answer.output})
    return Transcript(steps, False)


@AGENTS.register(
    "openai",
    "a real model through the model layer (make_client), with bash/read/edit/write tools",
    proxy=False,
    label="model agent",
)
def make_model_agent(settings: ContinuationConfig, model_settings: ModelConfig, run_dir=None, client=None):
    """``model_settings``: the run's [model] with [continuation.model] on top."""
    from evalkit.models import make_client

    client = client or make_client(model_settings, run_dir)
    model = model_settings.model
    max_tokens = settings.max_tokens

    def agent(inp: ContinuationInput, env: ReplayEnvironment) -> Transcript:
        return run_model_agent(inp, env, client, model, max_tokens)

    return agent
