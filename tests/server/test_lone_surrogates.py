"""Lone surrogates (issue 30, item 12): a code point U+D800-U+DFFF on its own, which JSON carries as
an escape (`"\\ud800"`) but UTF-8 cannot encode. A model's SQL holding one made `flexsql ask --json`
die with UnicodeEncodeError and print no JSON; a client request holding one got no reply at all on
stdio (the SDK's parser dropped the line) and a bare parse error on a 2025 HTTP session. Each is
replaced by U+FFFD, and the request is served; a valid pair (an emoji) passes as it is.

Through the real interfaces: `flexsql ask` and `flexsql serve` in subprocesses, raw JSON-RPC lines on
stdio, raw HTTP POSTs on both protocol versions, the SDK client for the MCP `ask` tool."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.support.agent_support import Shop, StageScript, build_shop
from tests.support.mcp_support import http_server, server_env, stdio_params, text_of
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.integration

LONE_SQL = 'SELECT count(*) AS "n\ud800" FROM orders'  # the model's SQL, a lone high surrogate in it
NO_REPAIRS = {
    "FLEXSQL_MODEL__MAX_RETRIES": "0",
    "FLEXSQL_AGENT__CODE_REPAIRS": "0",
    "FLEXSQL_AGENT__EVALUATE": "false",
    "FLEXSQL_AGENT__PLANS": "1",
}
# JSON-RPC text as a client writes it: the escapes are in the text itself
LONE_ARGUMENTS = [
    ("describe_table", '{"table": "x\\ud800"}', "x\ufffd"),  # the error names the table it looked for
    ("validate_sql", '{"sql": "SELECT \'\\udfff\' AS s"}', "valid"),
    ("run_query", "{\"sql\": \"SELECT '\\ud83d\\ude00' AS pair, '\\ude00\\ud83d' AS lone\"}", "\U0001f600"),
]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    built = build_shop(tmp_path_factory.mktemp("shop"))
    yield built
    built.close()


def lone_model() -> StageScript:
    return StageScript(plans={"count every order": LONE_SQL})


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_flexsql_ask_prints_a_models_lone_surrogate_as_the_replacement_character(
    shop: Shop, as_json: bool
) -> None:
    with OpenAIStub(lone_model()) as stub:
        args = ["ask", "How many orders are there?", "--db", shop.url, "--base-url", stub.base_url]
        done = subprocess.run(
            [sys.executable, "-P", "-m", "flexsql.server", *args, "--model", "m"]
            + (["--json"] if as_json else []),
            capture_output=True,
            env=server_env(NO_REPAIRS),
            timeout=180,
        )
    out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "UnicodeEncodeError" not in err, err[-2000:]
    assert done.returncode == 1, (done.returncode, out[-1000:], err[-1000:])  # failed: DuckDB refused the SQL
    if as_json:
        answer = json.loads(out)
        assert answer["status"] == "failed"
        codes = [c["code"] for c in answer["candidates"]]
        assert codes == ['SELECT count(*) AS "n\ufffd" FROM orders'], codes
    else:
        assert out.splitlines()[0] == "failed", out


def rpc(request_id: int, tool: str, arguments: str, meta: str = "") -> str:
    params = f'{{"name": "{tool}", "arguments": {arguments}{meta}}}'
    return f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", "params": {params}}}'


def replies_on_stdio(url: str, lines: list[str], expect: int) -> dict[int, dict[str, Any]]:
    """`flexsql serve` on stdio, sent an initialize and `lines`: the replies by id, within 60 s."""
    params = stdio_params(url)
    proc = subprocess.Popen(
        [params.command, *params.args],
        env=params.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    for line in [json.dumps(hello), json.dumps(initialized), *lines]:
        proc.stdin.write(line.encode() + b"\n")
    proc.stdin.flush()
    replies: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    try:
        while len(replies) < expect + 1 and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                message = json.loads(line)
                replies[message.get("id")] = message
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    return replies


def reply_text(message: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in message["result"]["content"])


def test_stdio_answers_every_request_with_a_lone_surrogate_escape(tmp_path: Path) -> None:
    from tests.support.engines import make_duckdb

    lines = [rpc(10 + i, tool, arguments) for i, (tool, arguments, _) in enumerate(LONE_ARGUMENTS)]
    lines.append(rpc(99, "list_sources", "{}"))  # positive control: a plain request after them
    replies = replies_on_stdio(make_duckdb(tmp_path), lines, expect=len(lines))
    assert 99 in replies, replies
    for i, (tool, _arguments, says) in enumerate(LONE_ARGUMENTS):
        assert 10 + i in replies, f"no reply to {tool}: {sorted(replies)}"
        assert says in reply_text(replies[10 + i]), replies[10 + i]
    pair = replies[12]["result"]["structuredContent"]["rows"]
    assert pair == [["\U0001f600", "\ufffd\ufffd"]]


MODERN_META = (
    ', "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", '
    '"io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}, '
    '"io.modelcontextprotocol/clientCapabilities": {}}'
)


def results_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a POST's reply (plain JSON, or the data line of an SSE event)."""
    assert response.status_code == 200, (response.status_code, response.text[:500])
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


@pytest.mark.parametrize("protocol", ["2026-stateless", "2025-session"])
def test_http_serves_a_request_with_a_lone_surrogate_escape(tmp_path: Path, protocol: str) -> None:
    from tests.support.engines import make_duckdb

    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with http_server(make_duckdb(tmp_path)) as (url, _proc):
        if protocol == "2025-session":
            hello = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            opened = httpx.post(url, json=hello, headers=accept, timeout=30)
            headers = {
                **accept,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-06-18",
            }
            httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        for i, (tool, arguments, says) in enumerate(LONE_ARGUMENTS):
            if protocol == "2025-session":
                body, sent = rpc(i, tool, arguments), headers
            else:
                body = rpc(i, tool, arguments, MODERN_META)
                sent = {
                    **accept,
                    "mcp-protocol-version": "2026-07-28",
                    "mcp-method": "tools/call",
                    "mcp-name": tool,
                }
            message = results_of(httpx.post(url, content=body.encode(), headers=sent, timeout=60))
            assert "result" in message, message  # served, not refused as unparseable
            assert says in reply_text(message), message
            assert "incompatible function arguments" not in reply_text(message)  # the engine got clean text


@pytest.mark.anyio
async def test_the_mcp_ask_tool_answers_with_a_models_lone_surrogate_replaced(shop: Shop) -> None:
    with OpenAIStub(lone_model()) as stub:
        env = {"FLEXSQL_MODEL__BASE_URL": stub.base_url, "FLEXSQL_MODEL__MODEL": "m", **NO_REPAIRS}
        async with Client(stdio_params(shop.url, env=env)) as client:
            result = await client.call_tool("ask", {"question": "How many orders are there?"})
            after = await client.call_tool("list_sources", {})  # the server is still there
    out = result.structured_content
    assert out["status"] == "failed" and [c["code"] for c in out["candidates"]] == [
        'SELECT count(*) AS "n\ufffd" FROM orders'
    ], text_of(result)
    assert not after.is_error
