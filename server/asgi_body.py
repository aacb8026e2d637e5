"""A POST body read ahead by an ASGI middleware (cancel on disconnect, lone surrogate escapes), then
handed on to the app as if unread."""

from __future__ import annotations

from starlette.types import Message, Receive

BODY_LIMIT = 4 * 1024 * 1024  # bigger bodies are refused by the SDK anyway: passed on untouched


async def read_ahead(receive: Receive) -> tuple[list[Message], bytes | None]:
    """The messages received up to the body's end (or past BODY_LIMIT, or a disconnect), and the
    whole body when it was read to its end within the limit (else None)."""
    buffered: list[Message] = []
    size, more = 0, True
    while more:
        message = await receive()
        buffered.append(message)
        if message["type"] != "http.request":
            return buffered, None
        size += len(message.get("body", b""))
        more = message.get("more_body", False) and size <= BODY_LIMIT
    if more or size > BODY_LIMIT:
        return buffered, None
    return buffered, b"".join(m.get("body", b"") for m in buffered)


def replay(buffered: list[Message], receive: Receive) -> Receive:
    """A receive that gives the read-ahead messages first, then the rest of the request."""
    queue = list(buffered)

    async def next_message() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return next_message
