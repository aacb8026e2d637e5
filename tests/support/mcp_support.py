"""Start flexsql's MCP server the ways users do (stdio subprocess, HTTP subprocess) for tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from mcp import Client, StdioServerParameters


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    keep = ("FLEXSQL_CACHE_DIR", "FLEXSQL_DATA_DIR")  # never the user's real cache or knowledge stores
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEXSQL_") or k in keep}
    env.update(extra or {})
    return env


def stdio_params(
    *db: str, extra_args: list[str] | None = None, env: dict[str, str] | None = None
) -> StdioServerParameters:
    args = ["-P", "-m", "flexsql.server", "serve"]  # -P: as users' clients do, cwd cannot shadow flexsql
    for url in db:
        args += ["--db", url]
    return StdioServerParameters(command=sys.executable, args=args + (extra_args or []), env=server_env(env))


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def http_server(
    *db: str, token: str | None = None, extra_args: list[str] | None = None, host: str = "127.0.0.1"
) -> Iterator[tuple[str, subprocess.Popen[Any]]]:
    """`flexsql serve --http` in a subprocess; yields (url, process) once it accepts connections.
    A wildcard bind (0.0.0.0, ::) is reached through 127.0.0.1, any other host through itself."""
    port = free_port()
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    args = [
        sys.executable,
        "-P",
        "-m",
        "flexsql.server",
        "serve",
        "--http",
        "--host",
        host,
        "--port",
        str(port),
    ]
    for url in db:
        args += ["--db", url]
    if token:
        args += ["--auth-token", token]
    proc = subprocess.Popen(
        args + (extra_args or []), env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("server exited: " + proc.stderr.read().decode(errors="replace")[-2000:])
            with contextlib.closing(socket.socket()) as sock:
                if sock.connect_ex((reach, port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("server did not start listening within 30 s")
        yield f"http://{reach}:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@contextlib.asynccontextmanager
async def http_client(
    url: str,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    session_ids: list[str] | None = None,
    **kwargs: Any,
) -> AsyncIterator[Client]:
    """An SDK `Client` over streamable HTTP, sending `token` as its bearer token when given and
    `headers` on every request; the `mcp-session-id` each response names is appended to
    `session_ids`; `kwargs` go to `Client` (mode="legacy" for a 2025 session, callbacks)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"

    async def note_session(response: Any) -> None:
        named = response.headers.get("mcp-session-id")
        if session_ids is not None and named and named not in session_ids:
            session_ids.append(named)

    async with httpx2.AsyncClient(
        headers=sent, timeout=httpx2.Timeout(30.0, read=300.0), event_hooks={"response": [note_session]}
    ) as http:
        async with Client(streamable_http_client(url, http_client=http), **kwargs) as client:
            yield client


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """An ASGI app (e.g. `build_server(...).streamable_http_app()`) served by uvicorn on a free
    loopback port in a thread of this process; yields its `/mcp` URL."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True, name="mcp-http-test-server")
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process HTTP server did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.asynccontextmanager
async def tool_caller(url: str, name: str = "db", settings: Any = None) -> AsyncIterator[Any]:
    """The MCP server over one database, in process, and an async `call(tool, **arguments) -> text`
    through a real MCP client (what every client reads); a tool error fails the test with its text."""
    from flexsql.config import Settings
    from flexsql.server.app import build_server
    from flexsql.tools.engines import SourceRegistry, open_source

    source = open_source(url, name=name)
    try:
        server = build_server(settings or Settings(), SourceRegistry([source]))
        async with Client(server) as client:

            async def call(tool: str, **arguments: Any) -> str:
                result = await client.call_tool(tool, arguments)
                text = text_of(result)
                assert not result.is_error, f"{tool}({arguments}) failed: {text}"
                return text

            yield call
    finally:
        source.close()


ALICE, BOB = "alice-token-" + "a" * 20, "bob-token-" + "b" * 22


class TwoTokens:
    """A token verifier with two clients, Alice and Bob (what an OAuth provider gives a multi-user
    deployment: one identity per user)."""

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        client = {ALICE: "alice", BOB: "bob"}.get(token)
        return AccessToken(token="***", client_id=client, scopes=[]) if client else None


@contextlib.contextmanager
def serve_with_two_tokens(settings: Any, sources: Any) -> Iterator[str]:
    """flexsql's MCP app (build_server) over HTTP in this process, accepting ALICE's and BOB's
    tokens; yields its `/mcp` URL."""
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.transport_security import TransportSecuritySettings

    from flexsql.server.app import build_server

    base = "http://127.0.0.1"
    auth = AuthSettings.model_validate(
        {"issuer_url": base, "resource_server_url": f"{base}/mcp", "validate_token_resource": False}
    )
    server = build_server(settings, sources, token_verifier=TwoTokens(), auth=auth)
    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False), host="127.0.0.1"
    )
    with serve_in_thread(app) as url:
        yield url
