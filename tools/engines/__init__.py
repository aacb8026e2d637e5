"""Database sources: one adapter per engine behind the `Source` interface, and a named registry."""

from __future__ import annotations

from collections.abc import Iterable

from flexsql.errors import ConfigError, NotFoundError
from flexsql.tools.engines.base import (
    Catalog,
    Column,
    FetchLimits,
    ForeignKey,
    QueryResult,
    SafetyReport,
    Source,
    TableInfo,
)
from flexsql.tools.engines.urls import open_source, redact

__all__ = [
    "Catalog",
    "Column",
    "FetchLimits",
    "ForeignKey",
    "QueryResult",
    "SafetyReport",
    "Source",
    "SourceRegistry",
    "TableInfo",
    "open_source",
    "redact",
]


class SourceRegistry:
    """The configured sources by name; the first one is the default."""

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self._sources: dict[str, Source] = {}
        for source in sources:
            self.add(source)

    def add(self, source: Source) -> None:
        if source.name in self._sources:
            raise ConfigError(
                f"two sources are named {source.name!r}; give one a different name "
                "(--db NAME=URL or name = … in flexsql.toml)"
            )
        self._sources[source.name] = source

    def get(self, name: str | None = None) -> Source:
        if not self._sources:
            raise NotFoundError(
                "no source is configured; start with --db URL or add [[sources]] to flexsql.toml"
            )
        if name is None or name == "":
            return next(iter(self._sources.values()))
        if name in self._sources:
            return self._sources[name]
        for key, source in self._sources.items():
            if key.lower() == name.lower():
                return source
        raise NotFoundError(f"source {name!r} not found; configured sources: {', '.join(self._sources)}")

    def __iter__(self):
        return iter(self._sources.values())

    def __len__(self) -> int:
        return len(self._sources)

    def names(self) -> list[str]:
        return list(self._sources)

    def close(self) -> None:
        for source in self._sources.values():
            source.close()
