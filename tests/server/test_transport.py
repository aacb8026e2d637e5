"""Serving over streamable HTTP (server/transport.py): a token when configured, none refused off
loopback, and structured results capped by bytes like the text is by characters (a result above
1 MiB used to break the official MCP client: `SSE event exceeded the 1048576 byte limit`)."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.mcp_support import http_server, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_huge_cells_and_many_rows_stay_under_the_cap_over_http(tmp_path):
    from tests.support.engines import make_duckdb

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


async def test_http_requires_token_when_configured(tmp_path):
    from tests.support.engines import make_duckdb

    url = make_duckdb(tmp_path)
    token = "t0ken-" + "x" * 24
    with http_server(url, token=token) as (endpoint, _proc):
        async with httpx2.AsyncClient() as http:
            denied = await http.post(
                endpoint,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Accept": "application/json, text/event-stream"},
            )
            assert denied.status_code == 401
            wrong = await http.post(
                endpoint,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Authorization": "Bearer nope", "Accept": "application/json, text/event-stream"},
            )
            assert wrong.status_code == 401
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(endpoint, http_client=http)) as client:
                result = await client.call_tool("run_query", {"sql": "SELECT count(*) FROM orders"})
                assert result.structured_content["rows"] == [[7]]


def test_http_on_public_address_without_token_is_refused(tmp_path):
    import subprocess
    import sys

    from tests.support.engines import make_duckdb
    from tests.support.mcp_support import server_env

    url = make_duckdb(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "flexsql.server", "serve", "--http", "--host", "0.0.0.0", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=server_env(),
    )
    assert proc.returncode == 2
    assert "--auth-token" in proc.stderr and "FLEXSQL_AUTH_TOKEN" in proc.stderr


async def test_healthz_reports_status_version_sources_and_calls_in_flight(tmp_path):
    from flexsql import __version__
    from tests.support.engines import make_duckdb, make_sqlite

    with http_server(make_duckdb(tmp_path), f"lite={make_sqlite(tmp_path)}") as (endpoint, _proc):
        async with httpx2.AsyncClient() as http:
            health = await http.get(endpoint.replace("/mcp", "/healthz"))
    assert health.status_code == 200
    body = health.json()
    memory = body.pop("memory")
    assert body == {"status": "ok", "version": __version__, "sources": 2, "calls_in_flight": 0}
    assert memory["result_store_mb"] == memory["result_claims_mb"] == 0 and memory["server_store_mb"] == 1024
    assert memory["engine_limit_mb"] == 2048  # the DuckDB source's engine_memory_mb (SQLite has no count)
    assert memory["rss_mb"] > 0 and memory["engine_mb"] >= 0


async def test_healthz_tells_the_result_store_from_the_engine(tmp_path):
    """/healthz's memory: what the sessions' stored results hold, within server_store_mb, apart from
    what DuckDB holds by its own count within engine_memory_mb."""
    from tests.support.engines import make_duckdb

    config = tmp_path / "flexsql.toml"
    config.write_text("[limits]\nserver_store_mb = 64\nengine_memory_mb = 128\n")
    sql = "SELECT i, repeat('x', 1000) AS pad FROM range(20000) r(i)"
    with http_server(make_duckdb(tmp_path), extra_args=["--config", str(config)]) as (endpoint, _proc):
        async with Client(endpoint, mode="legacy") as client, httpx2.AsyncClient() as http:
            ran = await client.call_tool("run_query", {"sql": sql})
            assert not ran.is_error
            memory = (await http.get(endpoint.replace("/mcp", "/healthz"))).json()["memory"]
    assert 20 < memory["result_store_mb"] <= memory["server_store_mb"] == 64, memory
    assert memory["result_claims_mb"] == 0  # the fetch is over: its claim became the result's charge
    assert memory["engine_limit_mb"] == 128 and 0 <= memory["engine_mb"] <= 128
    assert memory["rss_mb"] > memory["result_store_mb"]


def test_a_taken_port_is_a_clear_error_before_serving(tmp_path):
    """Was: "serving …" logged, then uvicorn's raw errno and exit 3."""
    import socket
    import subprocess
    import sys

    from tests.support.engines import make_duckdb
    from tests.support.mcp_support import server_env

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "flexsql.server", "serve", "--http", "--port", str(port),
             "--db", make_duckdb(tmp_path)],
            capture_output=True, text=True, timeout=120, env=server_env(),
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in proc.stderr and "--port" in proc.stderr
    assert "serving" not in proc.stderr and "errno" not in proc.stderr.lower()


async def test_a_client_with_slow_queries_cannot_hold_every_statement_slot(tmp_path):
    """Two sessions over HTTP, server_statements = 2: one session's slow query holds its share (half
    the slots) — its next query waits and fails naming the limit — while the other session's query runs
    at once, and /healthz shows the working memory the running statement holds."""
    import anyio

    from tests.support.engines import make_duckdb

    config = tmp_path / "flexsql.toml"
    config.write_text("[limits]\nserver_statements = 2\nstatement_mb = 16\n")
    slow = "SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3"
    with http_server(make_duckdb(tmp_path), extra_args=["--config", str(config)]) as (endpoint, _proc):
        health = endpoint.replace("/mcp", "/healthz")
        async with (
            Client(endpoint, mode="legacy") as greedy,
            Client(endpoint, mode="legacy") as other,
            httpx2.AsyncClient() as http,
        ):
            outcome: dict[str, object] = {}

            async def hold() -> None:
                outcome["slow"] = await greedy.call_tool("run_query", {"sql": slow, "timeout_s": 4})

            async with anyio.create_task_group() as group:
                group.start_soon(hold)
                with anyio.fail_after(10):
                    while (await http.get(health)).json()["memory"]["statements_mb"] == 0:
                        await anyio.sleep(0.05)
                second = await greedy.call_tool("run_query", {"sql": "SELECT 1", "timeout_s": 0.5})
                assert second.is_error and "most one client may run at once" in text_of(second)
                with anyio.fail_after(2):
                    ran = await other.call_tool("run_query", {"sql": "SELECT 42 AS x"})
                assert not ran.is_error and "42" in text_of(ran)
            assert outcome["slow"].is_error  # cancelled at its own timeout
            memory = (await http.get(health)).json()["memory"]
            assert memory["statements_mb"] == 0
