"""Per-client state of the MCP server: one ToolContext per client session, bounded."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from mcp.server.mcpserver import Context

from flexsql.config import Settings
from flexsql.tools.engines import SourceRegistry
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.results import ResultStore


class SessionState:
    """ToolContexts by client session: one for stdio or in-process calls (a single client), one per
    streamable-HTTP session id (`mcp-session-id`), and one shared by stateless HTTP requests (no
    session id). Results of one HTTP session never reach another; the stateless store hands out
    random result ids, so a stateless client reaches only results whose ids it was given. At most
    MAX_SESSIONS are kept (least recently used dropped), so a long-running server's memory stays
    bounded."""

    MAX_SESSIONS = 64

    def __init__(self, sources: SourceRegistry, settings: Settings) -> None:
        self.sources = sources
        self.settings = settings
        # per-source caches shared by all sessions; nothing per-session may go here (tools/runtime/context.py)
        self.caches: dict[str, Any] = {}
        self._contexts: OrderedDict[str, ToolContext] = OrderedDict()
        self._lock = threading.Lock()

    def new_context(self, shared: bool = False) -> ToolContext:
        """`shared`: the store serves several clients (stateless HTTP), so its ids are capabilities.
        A store owned by one session keeps short sequential ids (`r1`, `r2`): the model repeats them
        in every call, and within a session there is no one to hide them from."""
        limits = self.settings.limits
        store = ResultStore(max_bytes=limits.store_mb * 1024 * 1024, ids="random" if shared else "sequential")
        return ToolContext(
            sources=self.sources,
            limits=limits,
            sandbox=self.settings.sandbox,
            results=store,
            caches=self.caches,
        )

    STATELESS = "http-stateless"

    @staticmethod
    def session_key(ctx: Context | None) -> str:
        try:
            request = ctx.request_context.request if ctx is not None else None
        except Exception:  # no request context behind this call (in-process)
            request = None
        if request is None or not hasattr(request, "headers"):  # stdio, in-process: one client
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
