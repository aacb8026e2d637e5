"""The MCP client's own model, through sampling (`sampling/createMessage`).

Used only when `ask` is called by a client that declares the sampling capability and no endpoint is
configured. Tools are offered only when the client declares `sampling.tools`; otherwise the stage
runs without tools. Sampling reports no token counts: usage is estimated (about 4 characters a token).
Works on legacy (handshake, <= 2025-11-25) sessions, where the server may send requests back.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError, NoBackChannelError

from flexsql.agent.contract import MAX_DEPTH, too_deep
from flexsql.agent.models.base import ChatRequest, ModelError, ModelReply, Stopwatch, ToolCall, Usage
from flexsql.config import ModelEndpoint

DEFAULT_MAX_TOKENS = 4096
DEFAULT_MAX_REPLY_BYTES = ModelEndpoint().max_reply_bytes
CALL_OVERHEAD = 64  # bytes a tool call counts for besides its input (a reply of a million empty calls is big)


def _capabilities(ctx: Any) -> types.ClientCapabilities | None:
    try:
        capabilities: types.ClientCapabilities | None = ctx.client_capabilities
        return capabilities
    except (AttributeError, ValueError, LookupError):  # outside a request
        return None


def supports_sampling(ctx: Any) -> bool:
    """Whether the client behind `ctx` declared sampling and this connection can carry its requests."""
    caps = _capabilities(ctx)
    if caps is None or caps.sampling is None:
        return False
    try:
        return bool(getattr(ctx.session, "can_send_request", True))
    except (AttributeError, ValueError, LookupError):
        return False


def supports_sampling_tools(ctx: Any) -> bool:
    caps = _capabilities(ctx)
    return caps is not None and caps.sampling is not None and caps.sampling.tools is not None


class SamplingModel:
    """A ChatModel that asks the MCP client's model (legacy `ctx.session.create_message`)."""

    def __init__(
        self,
        ctx: Any,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.ctx = ctx
        self.max_tokens = max_tokens
        self.max_reply_bytes = max_reply_bytes
        self.tools_enabled = supports_sampling_tools(ctx)
        self.name = "mcp-sampling" + ("+tools" if self.tools_enabled else "")

    def __repr__(self) -> str:
        return f"SamplingModel({self.name!r})"

    async def complete(self, request: ChatRequest) -> ModelReply:
        watch = Stopwatch()
        tools = _mcp_tools(request.tools) if request.tools and self.tools_enabled else None
        system, messages = to_sampling_messages(request.messages, tool_turns=self.tools_enabled)
        if request.response_schema is not None:
            # no structured outputs through sampling: state the schema instead
            system = (system + "\n\n" if system else "") + (
                "Answer with one JSON object matching this JSON schema, and nothing else:\n"
                + json.dumps(request.response_schema)
            )
        kwargs: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "system_prompt": system or None,
            "metadata": {"flexsql_stage": request.stage, "flexsql_run": request.run_id},
            "related_request_id": self.ctx.request_id,
        }
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = types.ToolChoice(mode=request.tool_choice)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # sampling is deprecated in 2026-07-28
                warnings.filterwarnings("ignore", message=".*deprecated.*")
                result = await self.ctx.session.create_message(messages, **kwargs)
        except NoBackChannelError:
            raise ModelError(
                f"stage {request.stage}: the MCP client cannot answer sampling requests on this connection; "
                "configure a model endpoint instead ([model] base_url and model in flexsql.toml, "
                "FLEXSQL_MODEL__BASE_URL, or --base-url/--model)"
            ) from None
        except MCPError as exc:
            raise ModelError(
                f"stage {request.stage}: the MCP client refused the sampling request ({exc}); "
                "check the client's sampling settings, or configure a model endpoint ([model] base_url "
                "and model)"
            ) from None
        except (ValueError, TypeError, RecursionError) as exc:  # an answer that is not a sampling result
            raise ModelError(
                f"stage {request.stage}: the MCP client answered the sampling request with something "
                f"that is not a sampling result ({type(exc).__name__}: {str(exc)[:200]}); configure a "
                "model endpoint instead ([model] base_url and model)"
            ) from None
        return _reply(result, request, watch, self.max_reply_bytes)


def _mcp_tools(tools: list[dict[str, Any]]) -> list[types.Tool]:
    out = []
    for tool in tools:
        fn = tool.get("function", tool)
        out.append(
            types.Tool(
                name=fn["name"],
                description=fn.get("description"),
                input_schema=fn.get("parameters") or {"type": "object", "properties": {}},
            )
        )
    return out


def to_sampling_messages(
    messages: list[dict[str, Any]], *, tool_turns: bool
) -> tuple[str, list[types.SamplingMessage]]:
    """(system prompt, sampling messages) from OpenAI chat messages. Tool calls and results become
    tool_use / tool_result blocks when the client takes tools, else plain text."""
    system: list[str] = []
    out: list[types.SamplingMessage] = []
    for message in messages:
        role, text = message.get("role"), _text(message.get("content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            out.append(types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text)))
        elif role == "assistant":
            blocks: list[Any] = [types.TextContent(type="text", text=text)] if text else []
            for call in message.get("tool_calls") or []:
                fn = call.get("function", {})
                if tool_turns:
                    blocks.append(
                        types.ToolUseContent(
                            id=call.get("id", ""),
                            name=fn.get("name", ""),
                            input=_arguments(fn.get("arguments")),
                        )
                    )
                else:
                    blocks.append(
                        types.TextContent(
                            type="text", text=f"[called {fn.get('name')}({fn.get('arguments')})]"
                        )
                    )
            if not blocks:
                blocks = [types.TextContent(type="text", text="")]
            out.append(
                types.SamplingMessage(
                    role="assistant", content=blocks if len(blocks) > 1 or tool_turns else blocks[0]
                )
            )
        elif role == "tool":
            if tool_turns:
                block = types.ToolResultContent(
                    tool_use_id=message.get("tool_call_id", ""),
                    content=[types.TextContent(type="text", text=text)],
                )
                previous = out[-1] if out else None
                # one user message carries all results of one assistant turn (SEP-1577)
                if (
                    previous is not None
                    and previous.role == "user"
                    and all(b.type == "tool_result" for b in previous.content_as_list)
                ):
                    previous.content = [*previous.content_as_list, block]
                else:
                    out.append(types.SamplingMessage(role="user", content=[block]))
            else:
                out.append(
                    types.SamplingMessage(
                        role="user",
                        content=types.TextContent(
                            type="text", text=f"[result of {message.get('name') or 'the tool'}]\n{text}"
                        ),
                    )
                )
    return "\n\n".join(s for s in system if s), out


def _reply(result: Any, request: ChatRequest, watch: Stopwatch, max_bytes: int) -> ModelReply:
    """The client's answer as a ModelReply. The client (any client) chose it: past `max_bytes` it is
    a ModelError, and a tool call whose input nests too deep comes back to the model as an error."""
    blocks = result.content if isinstance(result.content, list) else [result.content]
    size = 0
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text" and isinstance(block.text, str):
            texts.append(block.text)
            size += len(block.text.encode("utf-8", errors="replace"))
        elif kind == "tool_use":
            calls.append(_tool_call(block, len(calls)))
            size += len(calls[-1].arguments) + len(calls[-1].id) + len(calls[-1].name) + CALL_OVERHEAD
        if size > max_bytes:
            raise ModelError(
                f"stage {request.stage}: the MCP client's model sent a reply of more than {max_bytes:,} "
                "bytes ([model] max_reply_bytes); it was not used — ask the client's model for shorter "
                "answers, or configure a model endpoint ([model] base_url and model)"
            )
    content = "\n".join(texts) if texts else None
    out_chars = len(content or "") + sum(len(c.arguments) for c in calls)
    return ModelReply(
        content=content,
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=len(json.dumps(request.messages, default=str)) // 4,
            completion_tokens=max(1, out_chars // 4),
        ),
        finish_reason={"toolUse": "tool_calls", "endTurn": "stop", "maxTokens": "length"}.get(
            result.stop_reason or "", result.stop_reason
        ),
        model=result.model,
        elapsed_s=watch.elapsed,
    )


def _tool_call(block: Any, index: int) -> ToolCall:
    call_id = block.id if isinstance(block.id, str) and block.id else f"call_{index}"
    name = block.name if isinstance(block.name, str) else ""
    value = block.input
    try:
        deep = too_deep(value)
        arguments = "{}" if deep else json.dumps(value)
    except (RecursionError, TypeError, ValueError):
        deep, arguments = True, "{}"
    problem = f"the arguments of {name[:80]} are nested more than {MAX_DEPTH} levels deep" if deep else None
    return ToolCall(id=call_id, name=name, arguments=arguments, problem=problem)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError, RecursionError):
        return {"_raw": str(raw)[:1000]}
    if too_deep(value):
        return {"_raw": str(raw)[:1000]}
    return value if isinstance(value, dict) else {"_value": value}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
