"""A wildcard bind (`--host 0.0.0.0` with a token) advertises a URL clients can reach: its OAuth
protected-resource metadata and its 401 challenge named `http://0.0.0.0:PORT`, which no client can
connect to. Real server subprocess, real HTTP client on loopback."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx2
import pytest
from engines import make_duckdb
from mcp_support import http_server

from flexsql.server.host_check import advertised_base

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
