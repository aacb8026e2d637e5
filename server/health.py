"""GET /healthz over HTTP: whether the server is up, its version, how many sources it serves, and how
many tool calls still have engine work running (a worker thread or the agent not yet returned).

`calls_in_flight` counts from the moment a call's work starts to the moment its worker actually
returns — not when the client is answered or gives up — so a cancelled query that is still running
on the engine is counted until it stops. Operators poll it; tests poll it instead of reading thread
states."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

from flexsql import __version__

T = TypeVar("T")
PATH = "/healthz"


class InFlight:
    """A thread-safe count of tool calls whose work is running."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return self._count

    def __enter__(self) -> None:
        with self._lock:
            self._count += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._count -= 1

    def counted(self, work: Callable[[], T]) -> Callable[[], T]:
        """`work`, counted while it runs in its own thread (entered there: a call cancelled before its
        thread started is never counted)."""

        def run() -> T:
            with self:
                return work()

        return run


CALLS_IN_FLIGHT = InFlight()  # per process: one server per `flexsql serve`


class Health:
    """Answers GET /healthz itself; passes every other request to `app`."""

    def __init__(self, app: ASGIApp, sources: int) -> None:
        self.app = app
        self.sources = sources

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != PATH:
            await self.app(scope, receive, send)
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await _send(send, 405, {"error": "use GET /healthz"}, head=False)
            return
        body = {
            "status": "ok",
            "version": __version__,
            "sources": self.sources,
            "calls_in_flight": CALLS_IN_FLIGHT.count,
        }
        await _send(send, 200, body, head=scope.get("method") == "HEAD")


async def _send(send: Send, status: int, payload: dict[str, object], head: bool) -> None:
    data = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else data})
