"""A model whose replies come from a Python function (or a list): unit tests and benchmarks."""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel

from flexsql.agent.models.base import ChatRequest, ModelError, ModelReply, Stopwatch, ToolCall, Usage

ScriptReply = ModelReply | dict[str, Any] | str


class ScriptedModel:
    """`script(request)` answers each request (it may be async, or a list consumed in order):

    - a str is the reply's content;
    - a dict with "tool_calls" is a tool-call turn: entries are (name, args), {"name", "arguments"}
      or ToolCall, args a dict or the raw text; "content" and "reasoning" may ride along;
    - any other dict is the stage's JSON object (sent as its JSON text);
    - a ModelReply is returned as it is.
    Usage is estimated at about 4 characters a token so budgets can be exercised.
    """

    def __init__(
        self, script: Callable[[ChatRequest], Any] | list[ScriptReply], name: str = "scripted"
    ) -> None:
        self.name = name
        self.requests: list[ChatRequest] = []
        self._script = script
        self._queue: list[ScriptReply] = list(script) if isinstance(script, list) else []

    def __repr__(self) -> str:
        return f"ScriptedModel({self.name!r})"

    async def complete(self, request: ChatRequest) -> ModelReply:
        watch = Stopwatch()
        self.requests.append(request)
        await anyio.lowlevel.checkpoint()  # a real call yields; so does this (cancellation, fairness)
        if isinstance(self._script, list):
            if not self._queue:
                raise ModelError(
                    f"scripted model {self.name}: the script has no reply left for request "
                    f"{len(self.requests)} (stage {request.stage}); add replies to the list"
                )
            answer: Any = self._queue.pop(0)
        else:
            answer = self._script(request)
            if inspect.isawaitable(answer):
                answer = await answer
        reply = to_reply(answer, request)
        reply.elapsed_s = reply.elapsed_s or watch.elapsed
        return reply


def to_reply(answer: Any, request: ChatRequest) -> ModelReply:
    if isinstance(answer, ModelReply):
        return answer.model_copy(deep=True)
    if isinstance(answer, str):
        reply = ModelReply(content=answer, finish_reason="stop")
    elif isinstance(answer, dict) and "tool_calls" in answer:
        calls = [_tool_call(c, i) for i, c in enumerate(answer["tool_calls"])]
        reply = ModelReply(
            content=answer.get("content"),
            tool_calls=calls,
            reasoning=answer.get("reasoning"),
            finish_reason="tool_calls" if calls else "stop",
        )
    elif isinstance(answer, dict):
        reply = ModelReply(content=json.dumps(answer), finish_reason="stop")
    else:
        raise ModelError(
            f"scripted model: the script returned {type(answer).__name__} for stage "
            f"{request.stage}; return a str, a dict or a ModelReply"
        )
    out_chars = len(reply.content or "") + sum(len(c.arguments) for c in reply.tool_calls)
    reply.usage = Usage(
        prompt_tokens=len(json.dumps(request.messages, default=str)) // 4,
        completion_tokens=max(1, out_chars // 4),
    )
    reply.model = "scripted"
    return reply


def _tool_call(entry: Any, index: int) -> ToolCall:
    if isinstance(entry, ToolCall):
        return entry
    if isinstance(entry, dict):
        name, args, call_id = entry["name"], entry.get("arguments", {}), entry.get("id")
    else:
        name, args = entry
        call_id = None
    return ToolCall(
        id=call_id or f"call_{index}_{uuid.uuid4().hex[:8]}",
        name=name,
        arguments=args if isinstance(args, str) else json.dumps(args),
    )
