"""The tool registry is the one declaration of the public tool surface: the MCP server, `flexsql call`
and the agent's OpenAI tools all come from it, and `tools/list` is snapshotted so any change to the
surface is a visible diff (regenerate with FLEXSQL_UPDATE_SNAPSHOT=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from pydantic import Field

from flexsql.config import Settings
from flexsql.server.app import SERVED, build_server
from flexsql.tools import python_tool
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import ToolArgs, ToolEnv, ToolResult, tool
from flexsql.tools.runtime.render import TextBudget
from flexsql.tools.toolbox import TOOLS
from tests.support.paths import FIXTURES

SNAPSHOT = FIXTURES / "tools_list.json"
pytestmark = pytest.mark.anyio


@pytest.fixture
def db(tmp_path: Path) -> str:
    import duckdb

    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, status VARCHAR, amount DECIMAL(10,2))")
    con.execute(
        "INSERT INTO orders SELECT i, CASE WHEN i % 3 = 0 THEN 'S' ELSE 'P' END, i * 1.5 FROM range(1, 101) t(i)"
    )
    con.close()
    return f"duckdb:///{path}"


def _server(url: str, settings: Settings | None = None, python: bool = True):  # type: ignore[no-untyped-def]
    sources = SourceRegistry()
    sources.add(open_source(url, name="shop"))
    return build_server(settings or Settings(), sources, allow_python=python)


async def _listed(url: str, settings: Settings | None = None, python: bool = True) -> list:
    async with Client(_server(url, settings, python)) as client:
        return (await client.list_tools()).tools


async def test_tools_list_matches_the_snapshot(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # what this host's sandbox cannot enforce is appended to run_python's description: not part of the contract
    monkeypatch.setattr(python_tool, "sandbox_warnings", lambda isolation=None: [])
    tools = await _listed(db)
    surface = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]
    if os.environ.get("FLEXSQL_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(surface, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert [t["name"] for t in surface] == [t["name"] for t in expected]
    for got, want in zip(surface, expected, strict=True):
        assert got == want, f"{got['name']} changed; review the diff and run with FLEXSQL_UPDATE_SNAPSHOT=1"


async def test_the_server_lists_exactly_the_registry(db: str) -> None:
    names = [t.name for t in await _listed(db)]
    assert names == list(SERVED)
    assert "run_python" not in [t.name for t in await _listed(db, python=False)]


def test_the_whole_list_stays_lean() -> None:
    # the client sends tools/list with every turn: name + description + input schema, all tools;
    # 5,945 before the parameters' ranges became schema bounds; 6,200 after families and paths, trimmed
    # to 5,990 (examples and words the schemas already say); the goal was at most 6,000. recall and
    # remember (the knowledge store) add 530 with one-line descriptions and no length bounds shown: 6,542
    assert SERVED.list_size(Settings()) <= 6600


async def test_descriptions_follow_the_configured_limits(db: str) -> None:
    settings = Settings(
        limits={"preview_rows": 7, "query_timeout_s": 12, "output_chars": 2500, "cell_chars": 50},
        sandbox={"timeout_s": 9},
    )
    described = {t.name: t.description for t in await _listed(db, settings)}
    assert "default 7" in described["run_query"] and "12 s" in described["run_query"]
    assert "2,500 characters" in described["run_query"]
    assert "50 characters" in described["sample_rows"]
    assert "9 s" in described["run_python"]


async def test_openai_tools_are_the_mcp_tools(db: str) -> None:
    listed = {t.name: t for t in await _listed(db)}
    exported = TOOLS.openai_tools(Settings())
    # the agent never calls itself, nor the tools declared for clients only (recall, remember: the agent's
    # stages receive recalled examples in their requests)
    clients_only = {name for name, spec in TOOLS.items() if not spec.agent_tool}
    assert clients_only == {"recall", "remember"}
    assert {e["function"]["name"] for e in exported} == set(listed) - {"ask"} - clients_only
    for entry in exported:
        fn = entry["function"]
        assert entry["type"] == "function"
        assert fn["parameters"] == listed[fn["name"]].input_schema
        assert fn["description"] == listed[fn["name"]].description
    subset = TOOLS.openai_tools(Settings(), ["run_query", "describe_table", "nosuch"])
    assert [e["function"]["name"] for e in subset] == ["run_query", "describe_table"]


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("describe_table", {"table": "nosuch"}, "not_found"),
        ("sample_rows", {"table": "orders", "limit": 0}, "invalid_argument"),
        ("describe_table", {}, "invalid_argument"),
        ("run_query", {"sql": "DELETE FROM orders"}, "refused"),
        ("run_query", {"sql": "SELECT nosuch FROM orders"}, "engine_error"),
        ("run_query", {"sql": "SELECT count(*) FROM range(100000000000) a", "timeout_s": 0.5}, "timeout"),
        ("fetch_rows", {"result_id": "r99"}, "not_found"),
        ("ask", {"question": "How many orders?"}, "config"),
    ],
)
async def test_error_results_carry_their_code(db: str, tool: str, arguments: dict, code: str) -> None:
    async with Client(_server(db)) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text
    assert text.startswith(f"{code}: "), text
    # in _meta, not structured_content: clients check structured content against the output schema
    assert result.meta["flexsql/error"] == {"code": code, "message": text}
    assert result.structured_content is None


async def test_run_python_disabled_is_unavailable_in_process(db: str) -> None:
    sources = SourceRegistry()
    sources.add(open_source(db, name="shop"))
    from flexsql.server.sessions import SessionState

    ctx = SessionState(sources, Settings()).new_context()
    with pytest.raises(Exception) as caught:
        TOOLS.call(ctx, "run_python", {"code": "1"}, ToolEnv(python_enabled=False))
    assert getattr(caught.value, "code", None) == "unavailable"


def test_arguments_are_checked_by_the_tool_model() -> None:
    spec = TOOLS.get_tool("find_values")
    assert spec.parse({"text": 1234}).text == "1234"  # numbers given for text stay text
    with pytest.raises(Exception, match="unknown argument 'tabel'"):
        TOOLS.get_tool("describe_table").parse({"tabel": "orders"})
    with pytest.raises(Exception, match="limit"):
        spec.parse({"text": "x", "limit": "many"})


@pytest.mark.integration
def test_flexsql_call_validates_before_connecting(db: str) -> None:
    cli = [sys.executable, "-P", "-m", "flexsql.server.cli"]
    bad = subprocess.run(
        [*cli, "call", "describe_table", "tabel=orders", "--db", db], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown argument 'tabel'" in bad.stderr
    ok = subprocess.run(
        [*cli, "call", "find_values", "text=S", "--db", db, "--json"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["matches"][0]["column"] == "status"
    listed = subprocess.run(
        [
            *cli,
            "call",
            "sample_rows",
            "table=orders",
            "columns=order_id,status",
            "limit=2",
            "--db",
            db,
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["columns"] == ["order_id", "status"]


# -- a new tool is one declaration ------------------------------------------------------------------


class CountRows(ToolArgs):
    table: str
    at_least: int = Field(0, ge=0, le=10**6, description="rows the answer must reach")


class RowCount(ToolResult):
    table: str
    rows: int

    def to_text(self, budget: TextBudget = TextBudget()) -> str:
        return f"{self.table}: {self.rows} rows"


@tool(lambda s: f"Count a table's rows (at least {CountRows.default('at_least')} by default).")
def count_rows(ctx: ToolContext, args: CountRows) -> RowCount:
    src = ctx.source()
    info = src.catalog().resolve(args.table)
    rows = src.execute(f"SELECT count(*) FROM {src.engine.quote_table(info)}").rows[0][0]
    return RowCount(table=info.qualified, rows=max(rows, args.at_least))


async def test_a_new_tool_is_one_declaration_listed_and_called_over_mcp(db: str) -> None:
    sources = SourceRegistry([open_source(db, name="shop")])
    server = build_server(Settings(), sources, tools=SERVED.with_tools(count_rows))
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["count_rows"].description == "Count a table's rows (at least 0 by default)."
        assert listed["count_rows"].input_schema == {
            "type": "object",
            "properties": {
                "table": {"type": "string"},
                "at_least": {
                    "default": 0,
                    "description": "rows the answer must reach",
                    "minimum": 0,
                    "maximum": 10**6,
                    "type": "integer",
                },
            },
            "required": ["table"],
        }
        called = await client.call_tool("count_rows", {"table": "orders"})
        assert not called.is_error and called.content[0].text.endswith("orders: 100 rows")
        assert called.structured_content == {"table": "main.orders", "rows": 100}
        refused = await client.call_tool("count_rows", {"table": "orders", "at_least": -1})
    assert refused.is_error
    assert "at_least=-1 is out of range: use a value from 0 to 1000000" in refused.content[0].text
    # the plain function is callable without MCP, with its argument model
    ctx = ToolContext(sources=sources)
    assert count_rows(ctx, CountRows(table="orders", at_least=500)).rows == 500


def test_a_declaration_without_models_is_refused() -> None:
    with pytest.raises(TypeError, match="ToolArgs model"):

        @tool("no model")
        def broken(ctx: ToolContext, table: str) -> RowCount:  # pragma: no cover - never registered
            raise AssertionError
