"""Per-client state of the MCP server: one ToolContext per client session, bounded."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from mcp.server.mcpserver import Context

from flexsql.config import Settings
from flexsql.tools.context import ToolContext
from flexsql.tools.results import ResultStore
from flexsql.tools.sources import SourceRegistry


class SessionState:
    """ToolContexts by client session: one for stdio (a single client), one per streamable-HTTP
    session id (`mcp-session-id`), and a shared one for session-less requests. Results of one HTTP
    session never reach another. At most MAX_SESSIONS are kept (least recently used dropped), so a
    long-running server's memory stays bounded."""

    MAX_SESSIONS = 64

    def __init__(self, sources: SourceRegistry, settings: Settings) -> None:
        self.sources = sources
        self.settings = settings
        self.caches: dict[str, Any] = {}  # catalog-derived caches, shared by all sessions
        self._contexts: OrderedDict[str, ToolContext] = OrderedDict()
        self._lock = threading.Lock()

    def new_context(self) -> ToolContext:
        limits = self.settings.limits
        return ToolContext(sources=self.sources, limits=limits, sandbox=self.settings.sandbox,
                           results=ResultStore(max_bytes=limits.store_mb * 1024 * 1024), caches=self.caches)

    @staticmethod
    def session_key(ctx: Context | None) -> str:
        try:
            request = ctx.request_context.request if ctx is not None else None
            session_id = request.headers.get("mcp-session-id") if request is not None else None
        except Exception:  # no HTTP request behind this call (stdio, in-process)
            session_id = None
        return f"http:{session_id}" if session_id else "default"

    def context_for(self, ctx: Context | None) -> ToolContext:
        key = self.session_key(ctx)
        with self._lock:
            found = self._contexts.get(key)
            if found is None:
                found = self.new_context()
                self._contexts[key] = found
                while len(self._contexts) > self.MAX_SESSIONS:
                    self._contexts.popitem(last=False)
            else:
                self._contexts.move_to_end(key)
            return found
