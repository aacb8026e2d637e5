"""Allowed hosts and the advertised URL (server/host_check.py), on a real server subprocess: binds off
loopback answer clients that use them, `--allowed-host` adds a name, DNS rebinding stays refused, and
a wildcard bind advertises a URL clients can reach (its OAuth metadata and 401 challenge used to name
`http://0.0.0.0:PORT`)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from flexsql.server.host_check import advertised_base
from tests.support.engines import make_duckdb
from tests.support.mcp_support import http_server

TOKEN = "wildcard-token-" + "x" * 24
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def test_advertised_base_names_the_machine_for_wildcard_binds_only() -> None:
    assert advertised_base("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert advertised_base("::1", 8000) == "http://[::1]:8000"
    for wildcard in ("0.0.0.0", "::"):
        host = urlsplit(advertised_base(wildcard, 8000)).hostname
        assert host not in ("0.0.0.0", "::", None)
        assert host == socket.gethostname().lower() or host[0].isdigit() or ":" in host


@pytest.mark.integration
@pytest.mark.anyio
async def test_a_wildcard_bind_advertises_a_url_it_answers_on(tmp_path) -> None:
    with http_server(make_duckdb(tmp_path), token=TOKEN, host="0.0.0.0") as (endpoint, _proc):
        root = endpoint.rsplit("/mcp", 1)[0]
        port = urlsplit(endpoint).port
        async with httpx2.AsyncClient() as http:
            challenge = await http.post(endpoint, json=LIST_TOOLS, headers=MCP_ACCEPT)
            assert challenge.status_code == 401
            www = challenge.headers["www-authenticate"]
            assert "0.0.0.0" not in www, www
            metadata_url = www.split('resource_metadata="', 1)[1].split('"', 1)[0]
            advertised = urlsplit(metadata_url)
            assert advertised.hostname not in ("0.0.0.0", "::") and advertised.port == port

            # read the metadata the way a client would, sending the advertised Host (reached on
            # 127.0.0.1 since the test cannot rely on the machine's name resolving)
            metadata = await http.get(root + advertised.path, headers={"Host": advertised.netloc})
            assert metadata.status_code == 200, metadata.text
            body = metadata.json()
            assert "0.0.0.0" not in metadata.text, body
            resource = urlsplit(body["resource"])
            assert (resource.netloc, resource.path) == (advertised.netloc, "/mcp")
            assert all(urlsplit(s).netloc == advertised.netloc for s in body["authorization_servers"])

            # and the advertised name passes the server's own DNS-rebinding check
            answer = await http.post(
                endpoint,
                json=LIST_TOOLS,
                headers={"Host": advertised.netloc, "Authorization": f"Bearer {TOKEN}", **MCP_ACCEPT},
            )
            assert answer.status_code not in (403, 421), answer.text


def loopback_alias_available() -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.2", 0))
        except OSError:
            return False
    return True


async def count_orders(endpoint: str, token: str | None = TOKEN) -> list[list[int]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(endpoint, http_client=http)) as client:
            result = await client.call_tool("run_query", {"sql": "SELECT count(*) FROM orders"})
            return result.structured_content["rows"]


def past_host_check(answer: httpx2.Response) -> bool:
    """The request reached MCP (a bare tools/list is then refused for want of a session, with 400)."""
    return answer.status_code not in (403, 421)


@pytest.mark.integration
@pytest.mark.anyio
@pytest.mark.skipif(not loopback_alias_available(), reason="127.0.0.2 cannot be bound on this machine")
async def test_a_bind_on_another_address_answers_clients_that_use_it(tmp_path):
    """Was: 421 'Invalid Host header' for every request (allowed hosts were the loopback names only)."""
    with http_server(make_duckdb(tmp_path), token=TOKEN, host="127.0.0.2") as (endpoint, _proc):
        assert endpoint.startswith("http://127.0.0.2:")
        assert await count_orders(endpoint) == [[7]]


@pytest.mark.integration
@pytest.mark.anyio
async def test_a_wildcard_bind_answers_on_the_machines_addresses_and_names(tmp_path):
    """Was: 421 for every request, the only allowed host being the literal 0.0.0.0:PORT."""
    with http_server(make_duckdb(tmp_path), token=TOKEN, host="0.0.0.0") as (endpoint, _proc):
        assert await count_orders(endpoint) == [[7]]  # reached on 127.0.0.1
        port = endpoint.rsplit(":", 1)[1].split("/")[0]
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", **MCP_ACCEPT}) as http:
            # the machine's own name, as a client on the LAN would write it
            by_name = await http.post(
                endpoint, json=LIST_TOOLS, headers={"Host": f"{socket.gethostname()}:{port}"}
            )
            assert past_host_check(by_name), by_name.text
            # DNS rebinding stays refused, and the refusal says how to allow a name
            rebound = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": f"evil.example:{port}"})
            assert rebound.status_code == 421
            assert "evil.example" in rebound.text and "--allowed-host" in rebound.text


@pytest.mark.integration
@pytest.mark.anyio
async def test_allowed_host_adds_a_name_a_proxy_or_dns_uses(tmp_path):
    extra = ["--allowed-host", "db-tools.internal", "--allowed-host", "mcp.example.org:443"]
    with http_server(make_duckdb(tmp_path), token=TOKEN, host="0.0.0.0", extra_args=extra) as (
        endpoint,
        _proc,
    ):
        port = endpoint.rsplit(":", 1)[1].split("/")[0]
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", **MCP_ACCEPT}) as http:
            for host in (f"db-tools.internal:{port}", "db-tools.internal", "mcp.example.org:443"):
                answer = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": host})
                assert past_host_check(answer), (host, answer.status_code, answer.text)
            wrong_port = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": "mcp.example.org:8443"})
            assert wrong_port.status_code == 421
            origin = await http.post(
                endpoint,
                json=LIST_TOOLS,
                headers={"Host": "db-tools.internal", "Origin": "https://db-tools.internal"},
            )
            assert past_host_check(origin), origin.text
            foreign = await http.post(
                endpoint,
                json=LIST_TOOLS,
                headers={"Host": "db-tools.internal", "Origin": "https://evil.example"},
            )
            assert foreign.status_code == 403


@pytest.mark.integration
@pytest.mark.anyio
async def test_loopback_without_token_still_refuses_rebinding(tmp_path):
    with http_server(make_duckdb(tmp_path)) as (endpoint, _proc):
        assert await count_orders(endpoint, token=None) == [[7]]
        async with httpx2.AsyncClient(headers=MCP_ACCEPT) as http:
            rebound = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": "evil.example"})
            assert rebound.status_code == 421
            # a wildcard bind's extra names never apply to a loopback bind
            by_name = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": socket.gethostname()})
            assert by_name.status_code == 421 or socket.gethostname() in ("localhost",)


@pytest.mark.integration
@pytest.mark.anyio
async def test_http_without_token_on_loopback_and_dns_rebinding_refused(tmp_path):
    from tests.support.engines import make_duckdb

    url = make_duckdb(tmp_path)
    with http_server(url) as (endpoint, _proc):
        async with Client(endpoint) as client:
            tools = await client.list_tools()
            assert "run_query" in {t.name for t in tools.tools}
        async with httpx2.AsyncClient() as http:
            rebound = await http.post(
                endpoint,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Host": "evil.example:80", "Accept": "application/json, text/event-stream"},
            )
            assert rebound.status_code in (400, 403, 421)
