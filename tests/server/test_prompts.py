"""The prompt templates served over MCP (server/prompts.py): prompts/list shows each template with its
arguments, prompts/get renders them as `flexsql.prompts.render` does, and a missing or misspelt
argument is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from flexsql import prompts
from tests.support.engines import make_duckdb
from tests.support.prompts import EXPECTED, LEFTOVER, every_argument, required_only


@pytest.fixture
def server(tmp_path: Path):
    from flexsql.config import Settings
    from flexsql.server.app import build_server
    from flexsql.tools.engines import SourceRegistry, open_source

    source = open_source(make_duckdb(tmp_path), name="shop")
    yield build_server(Settings(), SourceRegistry([source]))
    source.close()


@pytest.mark.anyio
async def test_prompts_list_shows_each_template_with_its_arguments(server) -> None:
    async with Client(server) as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(listed) == EXPECTED
    for t in prompts.list_prompts():
        served = listed[t.name]
        assert served.description == t.description
        assert [(a.name, a.required, a.description) for a in served.arguments] == [
            (a.name, a.required, a.description) for a in t.arguments
        ]


@pytest.mark.anyio
async def test_prompts_get_renders_with_and_without_optional_arguments(server) -> None:
    async with Client(server) as client:
        for t in prompts.list_prompts():
            for args in (required_only(t), every_argument(t)):
                result = await client.get_prompt(t.name, args)
                assert len(result.messages) == 1 and result.messages[0].role == "user"
                text = result.messages[0].content.text
                assert text == prompts.render(t.name, **args)
                assert not LEFTOVER.search(text)


@pytest.mark.anyio
async def test_prompts_get_without_a_required_argument_is_a_clear_error(server) -> None:
    async with Client(server) as client:
        with pytest.raises(MCPError) as info:
            await client.get_prompt("implement", {"question": "Top 3 stores?"})
        assert info.value.code == INVALID_PARAMS
        assert "prompt 'implement' needs the required argument 'plan'" in info.value.message
        with pytest.raises(MCPError, match="no argument 'sorce'; did you mean 'source'"):
            await client.get_prompt("plan", {"question": "q", "sorce": "demo"})


@pytest.mark.anyio
@pytest.mark.parametrize("sandbox", [True, False])
async def test_a_server_without_the_sandbox_serves_prompts_that_never_name_run_python(
    tmp_path: Path, sandbox: bool
) -> None:
    """The implement prompt once told every client both "choose SQL or Python (run_python)" and "this
    server runs no Python programs": each server names the tools it serves, and only those."""
    from flexsql.config import Settings
    from flexsql.server.app import build_server
    from flexsql.tools.engines import SourceRegistry, open_source

    settings = Settings()
    settings.sandbox.enabled = sandbox
    source = open_source(make_duckdb(tmp_path), name="shop")
    try:
        async with Client(build_server(settings, SourceRegistry([source]))) as client:
            served = {t.name for t in (await client.list_tools()).tools}
            args = {"question": "Top 3 stores?", "plan": "sum the sales per store"}
            text = (await client.get_prompt("implement", args)).messages[0].content.text
    finally:
        source.close()
    assert ("run_python" in served) == sandbox
    assert ("run_python" in text) == sandbox
    assert ("this server runs no Python programs" in text) == (not sandbox)
    assert ("1. Choose the language." in text) == sandbox
