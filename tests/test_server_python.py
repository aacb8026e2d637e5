"""run_python through real MCP clients: pandas over a run_query result, a DataFrame becoming a
result_id that compare_results accepts, flexsql.sql() through the server, captured output."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp_support import stdio_params, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def duck_url(tmp_path):
    from engines import make_duckdb

    return make_duckdb(tmp_path)


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
