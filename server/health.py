"""GET /healthz over HTTP: whether the server is up — to anyone, as a load balancer's check needs — and,
to a client that shows the bearer token (or to anyone when the server has none: loopback), what it is
doing: its version, how many sources it serves, how many tool calls still have engine work running (a
worker thread or the agent not yet returned) and its memory. Without the token the answer is
`{"status": "ok"}` and nothing else: the process's memory and load are the operator's to read, not
every caller's.

`memory` (MB) tells the server's RSS apart: `result_store_mb`, what all sessions' stored results hold
(as the result store charges them), `result_claims_mb`, what fetches in progress have claimed, and
`statements_mb`, the working memory held for the statements running now (engines/gate.py) — the three
stay within `server_store_mb` ([limits] server_store_mb); `engine_mb`, what embedded engines (DuckDB)
hold by their own count, each within its [limits] engine_memory_mb (`engine_limit_mb`, summed); `rss_mb`,
the whole process. What RSS holds beyond those is the interpreter and the libraries; the engines' memory
outside their own count (a DuckDB query's streaming buffer, 10 MiB, and the chunks its threads build) is
what `statements_mb` holds room for.

`calls_in_flight` counts from the moment a call's work starts to the moment its worker actually
returns — not when the client is answered or gives up — so a cancelled query that is still running
on the engine is counted until it stops. Operators poll it; tests poll it instead of reading thread
states."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

import anyio
from mcp.server.auth.provider import TokenVerifier
from starlette.types import ASGIApp, Receive, Scope, Send

from flexsql import __version__
from flexsql.tools.engines import Source
from flexsql.tools.runtime.results import StoreBudget

T = TypeVar("T")
PATH = "/healthz"
MB = 1024 * 1024


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


def rss_mb() -> float | None:
    """The process's resident memory, from /proc (None where there is none)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(pages * os.sysconf("SC_PAGE_SIZE") / MB, 1)


def memory_figures(budget: StoreBudget, sources: Iterable[Source]) -> dict[str, float | None]:
    """/healthz's `memory`: the result store's budget, the embedded engines' own counts, the RSS."""
    engines = [m for m in (source.engine_memory() for source in sources) if m is not None]
    return {
        "rss_mb": rss_mb(),
        "result_store_mb": round(budget.bytes_used / MB, 1),
        "result_claims_mb": round(budget.bytes_reserved / MB, 1),
        "statements_mb": round(budget.bytes_working / MB, 1),
        "server_store_mb": round(budget.max_bytes / MB, 1),
        "engine_mb": round(sum(m.used_bytes for m in engines) / MB, 1),
        "engine_limit_mb": round(sum(m.limit_bytes for m in engines) / MB, 1),
    }


class Health:
    """Answers GET /healthz itself; passes every other request to `app`. `memory`: the figures of
    the body's `memory` (memory_figures), read in a worker thread (an engine is asked for its own)."""

    def __init__(
        self,
        app: ASGIApp,
        sources: int,
        memory: Callable[[], dict[str, float | None]] | None = None,
        verifier: TokenVerifier | None = None,
    ) -> None:
        """`verifier`: the server's bearer-token check; None (no token) answers everything to anyone."""
        self.app = app
        self.sources = sources
        self.memory = memory
        self.verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != PATH:
            await self.app(scope, receive, send)
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await _send(send, 405, {"error": "use GET /healthz"}, head=False)
            return
        if not await self._shows_token(scope):
            await _send(send, 200, {"status": "ok"}, head=scope.get("method") == "HEAD")
            return
        body: dict[str, object] = {
            "status": "ok",
            "version": __version__,
            "sources": self.sources,
            "calls_in_flight": CALLS_IN_FLIGHT.count,
        }
        if self.memory is not None:
            body["memory"] = await anyio.to_thread.run_sync(self.memory)
        await _send(send, 200, body, head=scope.get("method") == "HEAD")

    async def _shows_token(self, scope: Scope) -> bool:
        if self.verifier is None:
            return True
        header = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return False
        return await self.verifier.verify_token(token.strip()) is not None


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
