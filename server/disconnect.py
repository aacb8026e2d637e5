"""Cancel a tool call whose HTTP client went away.

On the 2026 wire the SDK cancels a request's handler when its response stream closes. On the
2025-era wire (clients that `initialize`) it does not: a request ends only by its answer or by a
`notifications/cancelled`, so a client killed mid-call left its query or Python program running to
its own timeout, holding the engine and a sandbox. This middleware watches each POST that carries
requests; when the connection drops before the response is complete it posts
`notifications/cancelled` for those ids into the same session (same session id and credentials), which
the SDK turns into a cancellation of the handler, which cancels the query on the engine
(CancelHooks) and kills the Python worker."""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flexsql.server.asgi_body import read_ahead, replay

log = logging.getLogger("flexsql.server")

FORWARDED_HEADERS = (b"host", b"authorization", b"mcp-session-id", b"mcp-protocol-version")


def request_ids(body: bytes) -> list[Any]:
    """Ids of the JSON-RPC requests (not notifications or responses) in a POST body."""
    try:
        payload = json.loads(body)
    except ValueError:
        return []
    messages = payload if isinstance(payload, list) else [payload]
    return [m["id"] for m in messages if isinstance(m, dict) and "method" in m and m.get("id") is not None]


class CancelOnDisconnect:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", [])) if scope["type"] == "http" else {}
        if scope["type"] != "http" or scope.get("method") != "POST" or b"mcp-session-id" not in headers:
            await self.app(scope, receive, send)
            return
        buffered, body = await read_ahead(receive)
        ids = request_ids(body) if body is not None else []
        if not ids:
            await self.app(scope, replay(buffered, receive), send)
            return

        finished = False

        async def watched_send(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        replayed = replay(buffered, receive)
        cancelled = False

        async def watched_receive() -> Message:
            nonlocal cancelled
            message = await replayed()
            if message["type"] == "http.disconnect" and not finished and not cancelled:
                cancelled = True
                await self._cancel(scope, headers, ids)
            return message

        await self.app(scope, watched_receive, watched_send)

    async def _cancel(self, scope: Scope, headers: dict[bytes, bytes], ids: list[Any]) -> None:
        log.info("HTTP client went away: cancelling request(s) %s", ids)
        forwarded = [(k, v) for k, v in headers.items() if k in FORWARDED_HEADERS]
        forwarded += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ]
        for request_id in ids:
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request_id, "reason": "the HTTP client disconnected"},
                }
            ).encode()
            inner = {**scope, "headers": forwarded + [(b"content-length", str(len(body)).encode())]}
            messages: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

            async def one_body(messages: list[Message] = messages) -> Message:
                return messages.pop(0) if messages else {"type": "http.disconnect"}

            async def discard(_message: Message) -> None:
                return None

            try:
                await self.app(inner, one_body, discard)
            except Exception:  # best effort: the call then ends at its own timeout, as before
                log.warning(
                    "could not cancel request %s after its client disconnected", request_id, exc_info=True
                )
