"""What every tool call needs besides its arguments: the sources, the session's result store,
the configured limits. One ToolContext per server session (or per agent run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flexsql.config import LimitsConfig, SandboxConfig
from flexsql.tools.results import ResultStore
from flexsql.tools.sources import Source, SourceRegistry


@dataclass
class ToolContext:
    sources: SourceRegistry
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    results: ResultStore = field(default_factory=ResultStore)
    # per-source caches owned by tool modules (value indexes, search indexes), keyed by name
    caches: dict[str, Any] = field(default_factory=dict)

    def source(self, name: str | None = None) -> Source:
        return self.sources.get(name)

    def cache(self, key: str, factory: Any) -> Any:
        if key not in self.caches:
            self.caches[key] = factory()
        return self.caches[key]
