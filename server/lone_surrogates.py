"""Client requests with a lone surrogate escape (`"\\ud800"`) in their JSON: the SDK's strict parser
refuses them — on stdio the message was dropped without any reply, on a 2025 HTTP session it was a
bare parse error — and where a request did get through, its text reached engines that cannot take it.
Both transports replace each such escape with `\\ufffd` before the SDK reads the message
(flexsql/surrogates.py), so the request is served with U+FFFD in place of the lone half."""

from __future__ import annotations

import io
import os
from typing import Any, BinaryIO

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from starlette.types import ASGIApp, Receive, Scope, Send

from flexsql.server.asgi_body import read_ahead, replay
from flexsql.surrogates import replace_surrogate_escapes


class ReplaceSurrogateEscapes:
    """ASGI middleware: a POST body's lone surrogate escapes replaced, its length unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        buffered, body = await read_ahead(receive)
        if body is not None:
            buffered = [{"type": "http.request", "body": replace_surrogate_escapes(body), "more_body": False}]
        await self.app(scope, replay(buffered, receive), send)


class _Lines:
    """stdin's lines as the SDK reads them, each with its lone surrogate escapes replaced."""

    def __init__(self, text: io.TextIOWrapper) -> None:
        self._text = text

    def readline(self, size: int = -1) -> str:
        # the wrapper decodes with errors="replace": the line holds no surrogate, only escapes of them
        return replace_surrogate_escapes(self._text.readline(size).encode()).decode()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._text, name)


def _claim_stdin() -> BinaryIO:
    """The wire's stdin, on a private descriptor; fd 0 then reads the null device, so that nothing a
    tool starts can read (and take) the client's messages — as the SDK's own stdio transport does."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    return os.fdopen(private, "rb", closefd=False)


def serve_stdio(server: MCPServer) -> None:
    """`server` on stdin/stdout, reading requests through `_Lines` (the SDK claims stdout itself)."""
    lines = _Lines(io.TextIOWrapper(_claim_stdin(), encoding="utf-8", errors="replace"))

    async def run() -> None:
        async with stdio_server(stdin=anyio.wrap_file(lines)) as (read_stream, write_stream):  # type: ignore[arg-type]
            lowlevel = server._lowlevel_server  # noqa: SLF001 - MCPServer.run_stdio_async, with our stdin
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    anyio.run(run)
