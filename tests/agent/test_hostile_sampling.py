"""The agent against a hostile MCP client's model (issue 21): with no endpoint configured, `ask` asks
the client's own model through sampling, so any client can hand the agent whatever it likes as the
model's reply — `{}`×N, a reply past the size cap, thousands of tool calls, tool input nested past
the parser's depth. Each ends in an answer (failed, with a reason), never an internal error."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, types

from flexsql.config import AgentConfig, ModelConfig, Settings
from flexsql.server.app import build_server
from tests.support.agent_support import Shop
from tests.support.hostile_model import braces
from tests.support.mcp_support import text_of

pytestmark = pytest.mark.anyio

QUESTION = "How many orders are there?"


def no_endpoint() -> Settings:
    return Settings(model=ModelConfig(), agent=AgentConfig(plans=1, tool_rounds=2, max_seconds=60.0))


def text(value: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", model="client-llm", content=types.TextContent(type="text", text=value)
    )


def tool_uses(inputs: list[dict[str, Any]]) -> types.CreateMessageResultWithTools:
    return types.CreateMessageResultWithTools(
        role="assistant",
        model="client-llm",
        stop_reason="toolUse",
        content=[
            types.ToolUseContent(id=f"t{i}", name="describe_table", input=value)
            for i, value in enumerate(inputs)
        ],
    )


def deep_input(depth: int = 150) -> dict[str, Any]:
    """Tool input nested past the agent's limit (64), as deep as the SDK's client serializes (~200)."""
    value: Any = []
    for _ in range(depth):
        value = [value]
    return {"table": "orders", "deep": value}


async def ask_with(shop: Shop, answer: Any, *, tools: bool = False) -> tuple[Any, list[str | None]]:
    """`ask` through a legacy client whose sampling callback answers with `answer(stage)`."""
    stages: list[str | None] = []

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        stage = (params.metadata or {}).get("flexsql_stage")
        stages.append(stage)
        return answer(stage, params)

    capabilities = types.SamplingCapability(tools=types.SamplingToolsCapability()) if tools else None
    server = build_server(no_endpoint(), shop.sources)
    async with Client(
        server, mode="legacy", sampling_callback=sample, sampling_capabilities=capabilities
    ) as client:
        result = await client.call_tool("ask", {"question": QUESTION})
    return result, stages


def assert_failed_clearly(result: Any, says: str) -> dict[str, Any]:
    assert "flexsql bug" not in text_of(result), text_of(result)
    out = result.structured_content
    assert out is not None and out["status"] == "failed", text_of(result)
    assert says in out["reason"], out["reason"]
    return out


async def test_a_sampled_reply_of_braces_is_refused_by_its_length(shop):
    """0.9 MB of `{}`: the correction tells the model its reply's length (sampling reports no
    usage, so its estimate, 4 characters a token, ends the question's budget soon after)."""
    told: list[str] = []

    def braces_reply(stage: str, params: types.CreateMessageRequestParams) -> Any:
        told.append(params.messages[-1].content_as_list[0].text)
        return text(braces(900_000))

    result, stages = await ask_with(shop, braces_reply)
    assert "flexsql bug" not in text_of(result), text_of(result)
    assert result.structured_content["status"] == "failed"
    assert len(told) >= 2 and "900,000 characters" in told[1], told[1:2]


async def test_a_sampled_reply_over_the_size_cap_is_a_model_error(shop):
    cap = Settings().model.max_reply_bytes
    result, stages = await ask_with(shop, lambda stage, params: text("x" * (cap + 1)))
    assert_failed_clearly(result, "max_reply_bytes")
    assert stages == ["classify", "link"]  # not retried: the client's model said it


async def test_thousands_of_sampled_tool_calls_run_at_most_the_limit(shop):
    answers = {
        "classify": lambda params: text('{"type": "answerable"}'),
        "plan": lambda params: text('{"plans": [{"reading": "r", "text": "count", "tables": ["orders"]}]}'),
        "implement": lambda params: text('{"language": "sql", "code": "SELECT count(*) AS n FROM orders"}'),
        "evaluate": lambda params: text('{"verdict": "ok", "feedback": ""}'),
    }

    def answer(stage: str, params: types.CreateMessageRequestParams) -> Any:
        if stage == "link":
            last = params.messages[-1].content_as_list
            if last[0].type == "tool_result":
                results = [b for m in params.messages for b in m.content_as_list if b.type == "tool_result"]
                limit = Settings().agent.tool_calls_per_reply
                told = [b.content[0].text for b in results]
                assert len(told) == limit  # the calls that ran; the last says how many more did not
                assert "not run: 2,984 more tool calls" in told[-1], told[-1][-300:]
                return text('{"tables": ["orders"], "notes": ""}')
            return tool_uses([{"table": f"t{i}"} for i in range(3_000)])
        return answers[stage](params)

    result, _ = await ask_with(shop, answer, tools=True)
    out = result.structured_content
    assert out["status"] == "answered", text_of(result)
    assert out["usage"]["tool_calls"] == Settings().agent.tool_calls_per_reply


async def test_sampled_tool_input_nested_past_the_parser_depth_is_a_tool_error(shop):
    told: list[str] = []

    def answer(stage: str, params: types.CreateMessageRequestParams) -> Any:
        if stage == "classify":
            return text('{"type": "answerable"}')
        if stage != "link":
            return text('{"plans": []}')  # the run ends here: the tool result is what is checked
        last = params.messages[-1].content_as_list
        if last[0].type == "tool_result":
            told.append(last[0].content[0].text)
            return text('{"tables": ["orders"], "notes": ""}')
        return tool_uses([deep_input()])

    result, stages = await ask_with(shop, answer, tools=True)
    assert "flexsql bug" not in text_of(result), text_of(result)
    assert result.structured_content["status"] == "failed"
    assert told and told[0].startswith("invalid_argument") and "nested" in told[0], told
