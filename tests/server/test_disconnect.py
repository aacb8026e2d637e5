"""An HTTP client that goes away cancels its call (server/disconnect.py): 2025-era clients (`mode=legacy`)
used to leave the query or Python program running to its 600 s timeout, holding a core; the 2026 wire
(`auto`) already cancelled. Real server subprocess, real client subprocess killed mid-call. Whether the
call's work still runs is read from GET /healthz's `calls_in_flight` (counted until the worker thread
returns), not from thread states, which a loaded machine blurs."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.engines import make_duckdb
from tests.support.mcp_support import http_server, server_env, text_of

IN_FLIGHT_WAIT_S = 60.0  # generous: a loaded machine may take seconds to start or stop a call


async def calls_in_flight(endpoint: str, wanted: int) -> int:
    """Poll the server's /healthz until `calls_in_flight` equals `wanted` (or the wait runs out);
    returns the last reading."""
    health = endpoint.rsplit("/mcp", 1)[0] + "/healthz"
    reading = -1
    with anyio.move_on_after(IN_FLIGHT_WAIT_S):
        async with httpx2.AsyncClient() as http:
            while True:
                reading = (await http.get(health)).json()["calls_in_flight"]
                if reading == wanted:
                    break
                await anyio.sleep(0.05)
    return reading


pytestmark = pytest.mark.integration


async def count_orders(endpoint: str, token: str | None = None) -> list[list[int]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(endpoint, http_client=http)) as client:
            result = await client.call_tool("run_query", {"sql": "SELECT count(*) FROM orders"})
            return result.structured_content["rows"]


CLIENT = """
import sys, anyio
from mcp import Client
async def main(endpoint, mode, tool, arguments):
    async with Client(endpoint, mode=mode) as client:
        print("connected", flush=True)
        await client.call_tool(tool, json.loads(arguments))
import json
anyio.run(main, *sys.argv[1:5])
"""

SLOW = {
    "run_query": {"sql": "SELECT count(*) FROM range(1000000000000)", "timeout_s": 600},
    "run_python": {"code": "x = 0\nwhile True:\n    x += 1", "timeout_s": 600},
}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "mode,tool", [("legacy", "run_query"), ("legacy", "run_python"), ("auto", "run_query")]
)
async def test_a_client_that_goes_away_cancels_its_call(tmp_path, mode, tool):
    """Was (2025-era clients, `mode=legacy`): the query or program ran on to its 600 s timeout after
    the client was killed, using a core; the 2026 wire (`auto`) already cancelled."""
    with http_server(make_duckdb(tmp_path)) as (endpoint, proc):
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, endpoint, mode, tool, json.dumps(SLOW[tool])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(),
        )
        try:
            assert client.stdout.readline() == b"connected\n", client.stderr.read().decode()[-2000:]
            # the positive control: the slow call is running on the server
            assert await calls_in_flight(endpoint, 1) == 1, "the slow call never ran"
        finally:
            client.kill()
            client.wait()
        # the disconnect reaches the server, which interrupts the query or kills the program: its worker
        # returns (left running, the call would hold it for its 600 s)
        assert await calls_in_flight(endpoint, 0) == 0, (
            "the server is still working on the departed client's call"
        )
        assert await count_orders(endpoint, token=None) == [[7]]
        async with Client(endpoint, mode=mode) as other:
            answer = await other.call_tool("run_python", {"code": "print(6 * 7)", "timeout_s": 20})
            assert "42" in text_of(answer)
