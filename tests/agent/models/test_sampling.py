"""The sampling model (agent/models/sampling.py): the agent's requests answered by a real MCP client's
model through sampling/createMessage, with tools when the client takes them, and a client without
sampling detected."""

from __future__ import annotations

import json

import pytest
from mcp import Client, types
from mcp.server.mcpserver import Context, MCPServer

from flexsql.agent.models import ChatRequest, SamplingModel, assistant_message, supports_sampling
from tests.support.chat import LINK_SCHEMA, SEARCH


def sampling_server() -> MCPServer:
    server = MCPServer("sampling-test")

    @server.tool()
    async def ask_model(question: str, ctx: Context) -> str:
        if not supports_sampling(ctx):
            return "no sampling"
        backend = SamplingModel(ctx)
        req = ChatRequest(
            stage="link",
            run_id="q-s",
            tools=[SEARCH],
            response_schema=LINK_SCHEMA,
            messages=[
                {"role": "system", "content": "Link the schema."},
                {"role": "user", "content": question},
            ],
        )
        reply = await backend.complete(req)
        if reply.tool_calls:
            history = [
                *req.messages,
                assistant_message(reply),
                *[
                    {"role": "tool", "tool_call_id": c.id, "content": "orders(id, total)"}
                    for c in reply.tool_calls
                ],
            ]
            reply = await backend.complete(req.model_copy(update={"messages": history}))
        return json.dumps({"name": backend.name, "content": reply.content})

    return server


@pytest.mark.anyio
async def test_sampling_with_tools_through_a_real_client():
    seen: list[types.CreateMessageRequestParams] = []

    async def sample(context, params: types.CreateMessageRequestParams):
        seen.append(params)
        last = params.messages[-1].content_as_list
        if last[0].type == "tool_result":
            return types.CreateMessageResultWithTools(
                role="assistant",
                model="client-llm",
                stop_reason="endTurn",
                content=[types.TextContent(type="text", text='{"tables": ["orders"]}')],
            )
        return types.CreateMessageResultWithTools(
            role="assistant",
            model="client-llm",
            stop_reason="toolUse",
            content=[types.ToolUseContent(id="t1", name="search_schema", input={"query": "orders"})],
        )

    async with Client(
        sampling_server(),
        mode="legacy",
        sampling_callback=sample,
        sampling_capabilities=types.SamplingCapability(tools=types.SamplingToolsCapability()),
    ) as client:
        result = await client.call_tool("ask_model", {"question": "total of orders?"})
    answer = json.loads(result.content[0].text)
    assert answer == {"name": "mcp-sampling+tools", "content": '{"tables": ["orders"]}'}
    assert [t.name for t in seen[0].tools] == ["search_schema"] and seen[0].tool_choice.mode == "auto"
    assert "Link the schema." in seen[0].system_prompt and '"tables"' in seen[0].system_prompt
    assert seen[0].metadata == {"flexsql_stage": "link", "flexsql_run": "q-s"}
    result_block = seen[1].messages[-1].content_as_list[0]
    assert (result_block.tool_use_id, result_block.content[0].text) == ("t1", "orders(id, total)")


@pytest.mark.anyio
async def test_sampling_without_tools_capability_sends_no_tools():
    seen: list[types.CreateMessageRequestParams] = []

    async def sample(context, params):
        seen.append(params)
        return types.CreateMessageResult(
            role="assistant",
            model="client-llm",
            content=types.TextContent(type="text", text='{"tables": []}'),
        )

    async with Client(sampling_server(), mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("ask_model", {"question": "q"})
    assert json.loads(result.content[0].text) == {"name": "mcp-sampling", "content": '{"tables": []}'}
    assert len(seen) == 1 and seen[0].tools is None


@pytest.mark.anyio
async def test_client_without_sampling_is_detected():
    async with Client(sampling_server(), mode="legacy") as client:
        result = await client.call_tool("ask_model", {"question": "q"})
    assert result.content[0].text == "no sampling"
