"""What every tool call needs besides its arguments: the sources, the session's result store,
the configured limits. One ToolContext per server session (or per agent run).

Where tool state lives, and why (the audit of every cache):

- per session — `results` (the ResultStore). Everything that belongs to one client's results lives
  in the store, with the result: rows, and the Arrow copy run_python hands over (`ResultStore.arrow`).
  Nothing per-session goes into `caches`, because the MCP server shares one `caches` dict among all
  its sessions (server/sessions.py).
- catalog-derived — attached to the catalog object (`Catalog.derived`), so `catalog(refresh=True)`
  drops them with the catalog they were computed from: the join graph (tools/joins.py) and
  describe_table's example values (tools/catalog.py). The search index (`search:<source>` in
  `caches`, tools/search/index.py) is catalog-derived too; it stores the catalog's `loaded_at` and is
  rebuilt when that changes, so it never outlives a refresh either.
- per source, shared by every session — `caches`, keyed `<module>:<source name>`: the value index
  handle (`values:<source>`, tools/values/index.py). It is data-derived, not catalog-derived: it is backed by
  a file shared across processes and checks each table's column signature itself, and `find_values
  refresh=true` rebuilds it. Safe to share: it holds no session's results.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from flexsql.config import LimitsConfig, SandboxConfig
from flexsql.tools.engines import Source, SourceRegistry
from flexsql.tools.runtime.results import ResultStore

T = TypeVar("T")

SourceName = str | None
"""A tool's `source` argument: a configured source's name; None (not given) means the first one."""

# one lock for every caches dict: creating an entry is rare and cheap, and the dict may be shared by
# many contexts (server sessions, agent threads), so a per-context lock would not protect it
_CACHE_LOCK = threading.RLock()


@dataclass
class ToolContext:
    sources: SourceRegistry
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    results: ResultStore = field(default_factory=ResultStore)
    # per-source caches shared by every session (see the module docstring for what may go here)
    caches: dict[str, Any] = field(default_factory=dict)

    def source(self, name: str | None = None) -> Source:
        return self.sources.get(name)

    def cache(self, key: str, factory: Callable[[], T]) -> T:
        """`caches[key]`, created by `factory()` at most once even when threads race for it."""
        # one factory per key (the key names the module that owns it), so the entry is what it makes
        found: T | None = self.caches.get(key)
        if found is not None:
            return found
        with _CACHE_LOCK:
            if key not in self.caches:
                self.caches[key] = factory()
            made: T = self.caches[key]
            return made
