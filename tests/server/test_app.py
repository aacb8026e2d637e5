"""The MCP server (server/app.py) through real clients: every tool over stdio on all four engines and
over streamable HTTP, bad arguments, cancellation, progress while the value index builds, refresh,
and run_python (pandas over a run_query result, a DataFrame becoming a result_id, flexsql.sql(),
captured output, disabled)."""

from __future__ import annotations

import time

import anyio
import pytest
from mcp import Client

from tests.support.engines import engine_params
from tests.support.mcp_support import http_server, stdio_params, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

EXPECTED_TOOLS = {
    "list_sources",
    "list_schemas",
    "list_tables",
    "describe_table",
    "search_schema",
    "find_join_path",
    "sample_rows",
    "profile_column",
    "distinct_values",
    "find_values",
    "run_query",
    "fetch_rows",
    "validate_sql",
    "compare_results",
    "run_python",
}


async def call(client: Client, tool: str, **args):
    return await client.call_tool(tool, args)


async def test_every_tool_over_stdio(shop_url, engine):
    async with Client(stdio_params(f"shop={shop_url}")) as client:
        await exercise_every_tool(client, engine)


async def test_every_tool_over_streamable_http(shop_url, engine):
    with http_server(f"shop={shop_url}") as (endpoint, _proc):
        async with Client(endpoint) as client:
            await exercise_every_tool(client, engine)


async def exercise_every_tool(client: Client, engine: str) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert EXPECTED_TOOLS <= set(tools)
    # remember writes to flexsql's own knowledge store (never a database): the one tool not read-only
    assert all(t.annotations and t.annotations.read_only_hint for n, t in tools.items() if n != "remember")
    assert tools["remember"].annotations and tools["remember"].annotations.read_only_hint is False
    assert tools["remember"].annotations.destructive_hint is False
    assert tools["run_query"].output_schema is not None

    r = await call(client, "list_sources")
    assert "shop" in text_of(r) and r.structured_content["sources"][0]["dialect"] in text_of(r)
    r = await call(client, "list_schemas")
    assert not r.is_error and r.structured_content["schemas"]
    r = await call(client, "list_tables")
    names = {t["name"].split(".")[-1].lower() for t in r.structured_content["tables"]}
    assert {"customers", "orders", "products", "shipped_orders"} <= names

    r = await call(client, "describe_table", table="orders")
    text = text_of(r).lower()
    assert "order_id" in text and "pk" in text and "e.g." in text
    if engine != "snowflake":
        assert "fk→customers" in text

    r = await call(client, "find_join_path", tables=["orders", "customers"])
    assert "customer_id" in text_of(r).lower()

    r = await call(client, "sample_rows", table="customers", where="country = 'France'", limit=5)
    assert r.structured_content["total_rows"] == 2

    r = await call(
        client, "run_query", sql="SELECT order_id, quantity FROM orders ORDER BY order_id", max_rows=3
    )
    first = r.structured_content
    assert first["total_rows"] == 7 and first["row_count"] == 3 and first["truncated"]
    assert "fetch_rows" in text_of(r)

    r = await call(client, "fetch_rows", result_id=first["result_id"], offset=3, limit=10)
    assert [row[0] for row in r.structured_content["rows"]] == [103, 104, 105, 106]

    r = await call(client, "run_query", sql="SELECT quantity, order_id FROM orders")
    r2 = await call(
        client, "compare_results", result_ids=[first["result_id"], r.structured_content["result_id"]]
    )
    assert r2.structured_content["equivalent"] is True

    r = await call(client, "validate_sql", sql="SELECT quantty FROM orders")
    assert r.structured_content["valid"] is False
    assert "quantity" in text_of(r).lower()

    r = await call(client, "distinct_values", table="orders", column="status")
    assert "S" in text_of(r)
    r = await call(client, "profile_column", table="orders", column="quantity")
    assert not r.is_error
    r = await call(client, "find_values", text="germany")
    assert "Germany" in text_of(r)
    r = await call(client, "search_schema", query="which products are in the lighting category")
    assert "products" in text_of(r).lower()
    r = await call(client, "run_query", sql="SELECT status FROM orders")
    r = await call(
        client,
        "run_python",
        code="df.iloc[:, 0].value_counts().to_dict()",
        result_ids=[r.structured_content["result_id"]],
    )
    assert r.structured_content["ok"] and "{'S': 5, 'P': 1, 'C': 1}" in text_of(r), text_of(r)


BAD_CALLS = [
    ("describe_table", {"table": "ordrs"}, "did you mean"),
    ("describe_table", {"table": "orders; DROP TABLE orders"}, "not found"),
    ("sample_rows", {"table": "orders", "columns": ["quantty"]}, "did you mean"),
    ("sample_rows", {"table": "orders", "limit": -1}, "out of range"),
    ("sample_rows", {"table": "orders", "limit": 10**9}, "out of range"),
    ("sample_rows", {"table": "orders", "where": "1=1; DELETE FROM orders"}, "single condition"),
    ("sample_rows", {"table": "orders", "where": "1=1 UNION SELECT 1"}, "single condition"),
    ("run_query", {"sql": "DELETE FROM orders"}, "refused: delete"),
    ("run_query", {"sql": "SELECT 1; DROP TABLE orders"}, "2 statements"),
    ("run_query", {"sql": "SELECT 1", "max_rows": -5}, "out of range"),
    ("run_query", {"sql": "SELECT 1", "timeout_s": 0}, "out of range"),
    ("run_query", {"sql": "SELECT * FROM"}, "could not be parsed"),
    ("fetch_rows", {"result_id": "r999", "offset": 0}, "unknown"),
    ("list_tables", {"cursor": "garbage"}, "cursor"),
    ("list_tables", {"limit": "many"}, "limit"),
    ("find_join_path", {"tables": ["orders"]}, "tables needs at least 2 items (got 1)"),
    ("compare_results", {"result_ids": ["r1"]}, "result_ids needs at least 2 items (got 1)"),
    ("list_sources", {"source": 3}, ""),
]


@pytest.mark.parametrize("engine", ["duckdb"], indirect=True)
async def test_bad_arguments_give_clear_errors_and_never_write(shop_url, engine):
    from tests.support.engines import content_checksum

    before = content_checksum(engine, shop_url)
    async with Client(stdio_params(shop_url)) as client:
        for tool, args, expected in BAD_CALLS:
            result = await client.call_tool(tool, args)
            if tool == "list_sources":
                continue  # extra arguments are ignored by the schema; it must simply not crash
            assert result.is_error, (tool, args, text_of(result))
            assert expected in text_of(result).lower(), (tool, args, text_of(result))
            assert "traceback" not in text_of(result).lower()
        ok = await client.call_tool("run_query", {"sql": "SELECT count(*) AS n FROM orders"})
        assert ok.structured_content["rows"] == [[7]]
    assert content_checksum(engine, shop_url) == before


@pytest.mark.parametrize("engine", engine_params("duckdb", "postgres"), indirect=True)
async def test_cancelling_a_call_cancels_its_query(shop, engine):
    """The in-process server: a client-side cancel of run_query stops the engine's work."""
    from flexsql.config import Settings
    from flexsql.server.app import build_server
    from flexsql.tools.engines import SourceRegistry

    long_sql = {
        "duckdb": "SELECT count(*) FROM range(1000000000000)",
        "postgres": "SELECT count(*) FROM generate_series(1, 100000000000)",
    }[engine]
    server = build_server(Settings(), SourceRegistry([shop]))
    async with Client(server) as client:
        started = time.monotonic()
        with anyio.move_on_after(1.0):
            await client.call_tool("run_query", {"sql": long_sql, "timeout_s": 600})
        # the engine must be free again quickly: a follow-up query answers at once
        result = await client.call_tool("run_query", {"sql": "SELECT count(*) FROM orders"})
        assert result.structured_content["rows"] == [[7]]
        assert time.monotonic() - started < 15  # the long query would run for many minutes


async def test_building_the_value_index_reports_progress(tmp_path):
    from tests.support.engines import make_duckdb

    url = make_duckdb(tmp_path)
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with Client(stdio_params(url)) as client:
        result = await client.call_tool("find_values", {"text": "Lighting"}, progress_callback=on_progress)
        assert "products.category" in text_of(result)
    assert updates, "no progress notification arrived while the value index was built"
    assert updates[-1][0] >= updates[0][0] and updates[-1][1] is not None


async def test_refresh_picks_up_new_tables_and_values(tmp_path):
    import sqlite3

    from tests.support.engines import make_sqlite

    url = make_sqlite(tmp_path)
    async with Client(stdio_params(url, extra_args=["--no-python"])) as client:
        first = await client.call_tool("find_values", {"text": "Zanzibar"})
        assert "0 column(s) matched" in text_of(first)
        # another program changes the database while the server runs (SQLite allows a writer beside readers)
        con = sqlite3.connect(tmp_path / "shop.sqlite")
        con.execute("CREATE TABLE islands (name TEXT)")
        con.execute("INSERT INTO islands VALUES ('Zanzibar')")
        con.commit()
        con.close()
        cached = await client.call_tool("list_tables", {})
        assert "islands" not in text_of(cached)  # the catalog is cached until asked to refresh
        fresh = await client.call_tool("list_tables", {"refresh": True})
        assert "islands" in text_of(fresh)
        found = await client.call_tool("find_values", {"text": "Zanzibar", "refresh": True})
        assert "islands.name" in text_of(found) and "'Zanzibar'" in text_of(found)


async def test_pandas_over_a_query_result_and_back_to_compare_results(duck_url):
    async with Client(stdio_params(duck_url)) as client:
        q = await client.call_tool("run_query", {"sql": "SELECT customer_id, quantity FROM orders"})
        rid = q.structured_content["result_id"]
        py = await client.call_tool(
            "run_python",
            {
                "code": "out = df.groupby('customer_id', as_index=False)['quantity'].sum()\nprint('groups', len(out))\nout",
                "result_ids": [rid],
            },
        )
        assert not py.is_error, text_of(py)
        assert "groups 5" in py.structured_content["stdout"]
        new_id = py.structured_content["result_id"]
        assert new_id and new_id != rid
        sql = await client.call_tool(
            "run_query", {"sql": "SELECT sum(quantity) AS q, customer_id FROM orders GROUP BY customer_id"}
        )
        same = await client.call_tool(
            "compare_results", {"result_ids": [new_id, sql.structured_content["result_id"]]}
        )
        assert same.structured_content["equivalent"] is True, text_of(same)
        rows = await client.call_tool("fetch_rows", {"result_id": new_id, "offset": 0, "limit": 10})
        assert sorted(r[1] for r in rows.structured_content["rows"]) == [1, 1, 3, 3, 14]


async def test_flexsql_sql_inside_the_sandbox_reads_and_is_refused_for_writes(duck_url):
    async with Client(stdio_params(duck_url)) as client:
        ok = await client.call_tool(
            "run_python", {"code": "t = flexsql.sql('SELECT count(*) AS n FROM orders')\nint(t['n'][0])"}
        )
        assert not ok.is_error and "7" in text_of(ok)
        refused = await client.call_tool("run_python", {"code": "flexsql.sql('DELETE FROM orders')"})
        text = text_of(refused)
        assert "refused" in text.lower() and "DELETE" in text
        assert refused.is_error  # a failed program is an error result, with its traceback as the text
        assert refused.structured_content["ok"] is False
        still = await client.call_tool("run_query", {"sql": "SELECT count(*) FROM orders"})
        assert still.structured_content["rows"] == [[7]]


async def test_stdout_is_captured_and_truncated_as_stated(duck_url):
    async with Client(stdio_params(duck_url, env={"FLEXSQL_SANDBOX__MAX_OUTPUT_CHARS": "500"})) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "500" in (tools["run_python"].description or "")
        result = await client.call_tool("run_python", {"code": "print('x' * 5000)"})
        out = result.structured_content
        assert len(out["stdout"]) <= 500 and out["stdout_truncated"] is True
        assert "truncated" in text_of(result)


async def test_run_python_can_be_disabled(duck_url):
    async with Client(stdio_params(duck_url, extra_args=["--no-python"])) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "run_python" not in names and "run_query" in names
