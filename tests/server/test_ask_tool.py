"""The MCP `ask` tool's contract with clients (issue 21): a failed answer is an error result, and
the agent never offers the model run_python where the server has it switched off.

The model is the scripted OpenAI-compatible stub; MCP clients are the SDK's real `Client`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from mcp import Client

from flexsql.server.app import build_server
from flexsql.server.cli import main as flexsql_main
from tests.support.agent_support import Shop, StageScript, build_shop, settings_for
from tests.support.mcp_support import text_of
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.anyio

COUNT_SQL = "SELECT count(*) AS n FROM orders"
MISSING_SQL = "SELECT count(*) AS n FROM returns"  # there is no returns table


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    built = build_shop(tmp_path_factory.mktemp("shop"))
    yield built
    built.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_failed_answer_is_an_error_result_with_its_structured_answer(shop: Shop, mode: str) -> None:
    script = StageScript(plans={"count the returns": MISSING_SQL}, repairs={MISSING_SQL: MISSING_SQL})
    with OpenAIStub(script) as stub:
        agent = {"plans": 1, "evaluate": False, "code_repairs": 1, "plan_revisions": 0}
        server = build_server(settings_for(stub, agent=agent), shop.sources)
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("ask", {"question": "How many returns were there?"})
    assert result.is_error, text_of(result)
    out = result.structured_content
    assert out["status"] == "failed" and "returns" in out["reason"], out
    assert text_of(result).startswith("status: failed")


async def test_an_answered_question_is_not_an_error(shop: Shop) -> None:
    with OpenAIStub(StageScript(plans={"count every order": COUNT_SQL})) as stub:
        server = build_server(settings_for(stub, agent={"plans": 1, "evaluate": False}), shop.sources)
        async with Client(server) as client:
            result = await client.call_tool("ask", {"question": "How many orders are there?"})
    assert not result.is_error and result.structured_content["status"] == "answered", text_of(result)


# -- run_python switched off --------------------------------------------------------------------


def python_script() -> StageScript:
    return StageScript(plans={"count every order": COUNT_SQL})


@pytest.mark.parametrize(
    ("enabled", "transport_allows", "offered"),
    [
        (False, True, False),  # [sandbox] enabled = false on stdio / loopback HTTP
        (None, False, False),  # HTTP on a public address: the transport's default is off
        (None, True, True),  # the control: on where the transport allows it
    ],
)
async def test_the_agent_offers_run_python_only_where_it_is_enabled(
    shop: Shop, enabled: bool | None, transport_allows: bool, offered: bool
) -> None:
    with OpenAIStub(python_script()) as stub:
        settings = settings_for(stub, agent={"plans": 1})
        settings.sandbox.enabled = enabled
        server = build_server(settings, shop.sources, allow_python=transport_allows)
        async with Client(server) as client:
            result = await client.call_tool("ask", {"question": "How many orders are there?"})
    assert result.structured_content["status"] == "answered", text_of(result)
    implement = [r for r in stub.requests if r.stage == "implement"]
    assert implement, [r.stage for r in stub.requests]
    for req in stub.requests:  # neither as a tool nor in the instructions; where on, in every request
        assert ("run_python" in req.tools) == offered, (req.stage, req.tools)
        if not offered:
            assert "run_python" not in req.text, req.stage
            assert "Python (language" not in req.text and "```python" not in req.text, req.stage


def test_flexsql_ask_offers_no_run_python_when_the_sandbox_is_disabled(shop: Shop) -> None:
    with OpenAIStub(python_script()) as stub:
        result = CliRunner().invoke(
            flexsql_main,
            [
                "ask",
                "How many orders are there?",
                "--db",
                shop.url,
                "--base-url",
                stub.base_url,
                "--model",
                "stub",
            ],
            env={"FLEXSQL_SANDBOX__ENABLED": "false", "FLEXSQL_AGENT__PLANS": "1", "COLUMNS": "200"},
        )
    assert result.exit_code == 0, result.output
    assert stub.requests and all(
        "run_python" not in r.tools and "run_python" not in r.text for r in stub.requests
    )
