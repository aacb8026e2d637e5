"""A ToolContext over one source, for tests that call the tools as functions."""

from __future__ import annotations

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext


def context(url: str) -> ToolContext:
    return ToolContext(sources=SourceRegistry([open_source(url, name="db")]))
