"""Per-client state of the MCP server: a ToolContext (its result store, and through it the agent's
conversations and clarifications) per client session; who each call comes from (its principal); and
the server-wide ceiling on agent runs.

Where a call's state lives is decided by what the SDK established, never by what a request says: a
2025 (legacy) streamable-HTTP request belongs to a session only when the SDK bound it to that live
session (it checked the `mcp-session-id` and that the request carries the credential that opened it),
and the session's state lives on that session's connection, so it ends when the session does (closed
by its client, or idle for the SDK's 30 minutes). A stateless (2026-07-28) request belongs to no
session, whatever `mcp-session-id` header it carries: it reaches the store shared by stateless clients
(random result ids), and its conversations are its token's."""

from __future__ import annotations

import contextlib
import json
import threading
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
SESSION_STATE = "flexsql.context"  # the key of a session's ToolContext in its connection's state


def bound_session(ctx: Context | None) -> Any:
    """The SDK's connection of the live 2025 session this request was bound to, or None (stdio,
    in-process calls, stateless HTTP). The SDK sets a connection's `session_id` only on a session it
    opened and checks each request against; a stateless request gets a fresh connection without one,
    whatever headers it carries."""
    try:
        # the SDK keeps the connection on the request's session object and offers no public way to it
        connection = ctx.request_context.session._connection if ctx is not None else None  # noqa: SLF001
    except Exception:  # no request context behind this call (in-process)
        return None
    return connection if getattr(connection, "session_id", None) else None


def _token_key() -> str | None:
    token = get_access_token()
    return None if token is None else "token:" + json.dumps(principal_components(token))


def principal_for(ctx: Context | None) -> Principal:
    """Who a call comes from, for the state kept across its calls (conversations, clarifications):

    - stdio and in-process calls: LOCAL, the one local client;
    - a live 2025 (legacy) streamable-HTTP session: that session (bound_session);
    - stateless 2026-07-28 HTTP with a bearer token: the token's identity (client, issuer, subject);
      without one: ANONYMOUS. Both mint conversation ids (`issues_ids`): a stateless request proves
      it continues a conversation only by the unguessable id the server returned for it."""
    if _request(ctx) is None:
        return LOCAL
    session = bound_session(ctx)
    if session is not None:
        return Principal(f"session:{session.session_id}")
    token = _token_key()
    return Principal(token, issues_ids=True) if token is not None else ANONYMOUS


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
    """ToolContexts by client: one for stdio or in-process calls (a single client), one per live 2025
    streamable-HTTP session (kept on the session's connection and dropped when the session ends), and
    one shared by stateless HTTP requests, whose store hands out random result ids, so a stateless
    client reaches only results whose ids it was given. No client's state is ever dropped to make room
    for another's: a client (a bearer token's identity; without a token, every client) keeps state in
    at most [limits] client_sessions sessions at once, and a session past them is refused as busy; the
    results of all together stay within [limits] server_store_mb (the biggest holder's evicted first).
    The agent keeps conversations and clarifications per principal (`principal_for`) within a context;
    `agent_runs` is the server-wide ceiling on `ask` calls at once."""

    def __init__(self, sources: SourceRegistry, settings: Settings) -> None:
        self.sources = sources
        self.settings = settings
        self.agent_runs = RunSlots(settings.agent)
        # per-source caches shared by all sessions; nothing per-session may go here (tools/runtime/context.py)
        self.caches: dict[str, Any] = {}
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
        self.local = self.new_context()
        self.stateless = self.new_context(shared=True)
        self.sessions: dict[str, set[str]] = {}  # client -> ids of its sessions that keep state

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

    principal_for = staticmethod(principal_for)

    def context_for(self, ctx: Context | None) -> ToolContext:
        """The state this call reaches; BusyError when it opens state in a session past its client's
        [limits] client_sessions."""
        if _request(ctx) is None:  # stdio, in-process: one client
            return self.local
        session = bound_session(ctx)
        if session is None:  # stateless HTTP, whatever mcp-session-id it names
            return self.stateless
        found: ToolContext | None = session.state.get(SESSION_STATE)
        if found is not None:
            return found
        client = _token_key() or ANONYMOUS.key
        limit = self.settings.limits.client_sessions
        with self._lock:
            found = session.state.get(SESSION_STATE)
            if found is not None:
                return found
            live = self.sessions.setdefault(client, set())
            if len(live) >= limit:
                raise BusyError(
                    f"this client already keeps results and conversations in {len(live)} sessions on this "
                    f"server, the most one client may ([limits] client_sessions = {limit}): close a session "
                    "you no longer use (an MCP client closes its own when it exits) or wait for an idle one "
                    "to expire (30 minutes); a bearer token per user gives each user their own count"
                )
            context = self.new_context()
            live.add(session.session_id)
            session.state[SESSION_STATE] = context
        session.exit_stack.push_async_callback(self._ended, client, session.session_id, context)
        return context

    async def _ended(self, client: str, session_id: str, context: ToolContext) -> None:
        """A session's connection closed: its state goes (its results' bytes back to the budget), freed
        in a worker thread — dropping a big result frees its rows one object at a time, which on the
        event loop would stall every other client's requests."""
        with self._lock:
            live = self.sessions.get(client)
            if live is not None:
                live.discard(session_id)
                if not live:
                    del self.sessions[client]
        await anyio.to_thread.run_sync(context.results.clear)
