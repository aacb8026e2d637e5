"""Per-client state of the MCP server: one ToolContext per client session, bounded; who each call
comes from (its principal); and the server-wide ceiling on agent runs."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.mcpserver import Context

from flexsql.config import AgentConfig, Settings
from flexsql.errors import BusyError
from flexsql.tools.engines import SourceRegistry, StatementGate
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import LOCAL, Principal
from flexsql.tools.runtime.results import ResultStore, StoreBudget

ANONYMOUS = Principal("anonymous", issues_ids=True)


def principal_for(ctx: Context | None) -> Principal:
    """Who a call comes from, for the state kept across its calls (conversations, clarifications):

    - stdio and in-process calls: LOCAL, the one local client;
    - a 2025 (legacy) streamable-HTTP session: the session (`mcp-session-id`, minted by the server,
      bound by the SDK to the token that opened it);
    - stateless 2026-07-28 HTTP with a bearer token: the token's identity (client, issuer, subject);
      without one: ANONYMOUS. Both mint conversation ids (`issues_ids`): a stateless request proves
      it continues a conversation only by the unguessable id the server returned for it."""
    request = _request(ctx)
    if request is None:
        return LOCAL
    session_id = request.headers.get("mcp-session-id")
    if session_id:
        return Principal(f"session:{session_id}")
    token = get_access_token()
    if token is not None:
        return Principal("token:" + json.dumps(principal_components(token)), issues_ids=True)
    return ANONYMOUS


def _request(ctx: Context | None) -> Any:
    try:
        request = ctx.request_context.request if ctx is not None else None
    except Exception:  # no request context behind this call (in-process)
        request = None
    return request if request is not None and hasattr(request, "headers") else None


class RunSlots:
    """The server's agent runs at once, for all clients together ([agent] max_concurrent_runs): an
    `ask` beyond them waits up to run_wait_s for one to end, then fails as busy having done nothing.
    Held on the server's event loop only, so plain counters suffice."""

    def __init__(self, config: AgentConfig) -> None:
        self.limit = config.max_concurrent_runs
        self.wait_s = config.run_wait_s
        self.running = 0
        self.waiting = 0
        self._freed: anyio.Event | None = None

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        if self.running >= self.limit:
            self.waiting += 1
            try:
                with anyio.move_on_after(self.wait_s):
                    while self.running >= self.limit:
                        if self._freed is None:
                            self._freed = anyio.Event()
                        await self._freed.wait()
            finally:
                self.waiting -= 1
            if self.running >= self.limit:
                n = self.running
                raise BusyError(
                    f"{n} agent run{'s' if n != 1 else ''} in progress (the server's limit, [agent] "
                    f"max_concurrent_runs = {self.limit}); waited {self.wait_s:g} s for one to end — try "
                    "again in a minute"
                )
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            freed, self._freed = self._freed, None
            if freed is not None:
                freed.set()


class SessionState:
    """ToolContexts by client session: one for stdio or in-process calls (a single client), one per
    streamable-HTTP session id (`mcp-session-id`), and one shared by stateless HTTP requests (no
    session id). Results of one HTTP session never reach another; the stateless store hands out
    random result ids, so a stateless client reaches only results whose ids it was given. At most
    MAX_SESSIONS are kept (least recently used dropped), so a long-running server's memory stays
    bounded. The agent keeps conversations and clarifications per principal (`principal_for`)
    within a context; `agent_runs` is the server-wide ceiling on `ask` calls at once."""

    MAX_SESSIONS = 64

    def __init__(self, sources: SourceRegistry, settings: Settings) -> None:
        self.sources = sources
        self.settings = settings
        self.agent_runs = RunSlots(settings.agent)
        # per-source caches shared by all sessions; nothing per-session may go here (tools/runtime/context.py)
        self.caches: dict[str, Any] = {}
        self._contexts: OrderedDict[str, ToolContext] = OrderedDict()
        self._lock = threading.Lock()
        # every session's result store draws from one budget ([limits] server_store_mb)
        limits = settings.limits
        self.store_budget = StoreBudget(
            limits.server_store_mb * 1024 * 1024,
            statements=limits.server_statements,
            statement_bytes=limits.statement_mb * 1024 * 1024,
        )
        # one gate for every source: the statements at once, and their working memory, are the server's
        gate = StatementGate(limits.server_statements, self.store_budget.statement_bytes, self.store_budget)
        for source in sources:
            source.gate = gate

    def new_context(self, shared: bool = False) -> ToolContext:
        """`shared`: the store serves several clients (stateless HTTP), so its ids are capabilities.
        A store owned by one session keeps short sequential ids (`r1`, `r2`): the model repeats them
        in every call, and within a session there is no one to hide them from."""
        limits = self.settings.limits
        store = ResultStore(
            max_bytes=limits.store_mb * 1024 * 1024,
            ids="random" if shared else "sequential",
            budget=self.store_budget,
        )
        return ToolContext(
            sources=self.sources,
            limits=limits,
            sandbox=self.settings.sandbox,
            results=store,
            caches=self.caches,
        )

    STATELESS = "http-stateless"

    principal_for = staticmethod(principal_for)

    @staticmethod
    def session_key(ctx: Context | None) -> str:
        request = _request(ctx)
        if request is None:  # stdio, in-process: one client
            return "default"
        session_id = request.headers.get("mcp-session-id")
        return f"http:{session_id}" if session_id else SessionState.STATELESS

    def context_for(self, ctx: Context | None) -> ToolContext:
        key = self.session_key(ctx)
        with self._lock:
            found = self._contexts.get(key)
            if found is None:
                found = self.new_context(shared=key == self.STATELESS)
                self._contexts[key] = found
                while len(self._contexts) > self.MAX_SESSIONS:
                    oldest = next(iter(self._contexts))
                    if (
                        oldest == self.STATELESS
                    ):  # shared by every stateless client: never dropped for a session
                        self._contexts.move_to_end(oldest)
                        continue
                    self._contexts.popitem(last=False)
            else:
                self._contexts.move_to_end(key)
            return found
