"""Structured results are capped by bytes like the text is by characters: over streamable HTTP a
result above 1 MiB used to break the official MCP client (`SSE event exceeded the 1048576 byte limit`)."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from mcp_support import http_server, text_of

pytestmark = pytest.mark.anyio


async def test_huge_cells_and_many_rows_stay_under_the_cap_over_http(tmp_path):
    from engines import make_duckdb

    url = make_duckdb(tmp_path)
    with http_server(url) as (endpoint, _proc):
        async with Client(endpoint) as client:
            big = await client.call_tool("run_query", {"sql": "SELECT repeat('x', 2000000) AS blob"})
            many = await client.call_tool(
                "run_query",
                {"sql": "SELECT i, repeat('y', 300) AS pad FROM range(20000) t(i)", "max_rows": 20000},
            )
            fetched = await client.call_tool(
                "fetch_rows", {"result_id": many.structured_content["result_id"], "offset": 0, "limit": 20000}
            )
    for result in (big, many, fetched):
        assert not result.is_error, text_of(result)
        payload = json.dumps(result.structured_content)
        assert len(payload) <= 1024 * 1024
        assert result.structured_content["truncated"] is True
    assert len(text_of(big)) <= 4000
    assert big.structured_content["rows"][0][0].startswith("xxx")  # cut, not dropped
    assert many.structured_content["total_rows"] == 20000  # the true total is still reported
