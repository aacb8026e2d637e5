"""Opening sources from URLs, and the configured sources by name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from flexsql.config import LimitsConfig
from flexsql.errors import ConfigError, NotFoundError
from flexsql.tools.engines.engine import Engine, engine_for_url
from flexsql.tools.engines.source import Source
from flexsql.tools.engines.urls import URL_FORMS, redact, source_name_for


def source_class(engine: Engine) -> type[Source]:
    """The Source subclass that connects to `engine` (each engine module defines one)."""
    pending, seen = list(Source.__subclasses__()), []
    while pending:
        cls = pending.pop()
        seen.append(cls)
        pending.extend(cls.__subclasses__())
    for cls in seen:
        if cls.__dict__.get("engine") is engine:
            return cls
    raise ConfigError(f"no Source connects to the {engine.name} engine; its module must define one")


def open_source(
    url: str,
    name: str | None = None,
    description: str = "",
    limits: LimitsConfig | None = None,
    knowledge: str | None = None,
) -> Source:
    """Open a source from its URL (lazily: nothing connects until first use). `limits` is the
    [limits] section; the engine applies its memory budget when it connects. `knowledge`: the folder
    of its knowledge store, when configured."""
    if "://" not in url:
        raise ConfigError(f"not a source URL: {redact(url)!r}; use one of: {URL_FORMS}")
    engine = engine_for_url(url)  # each engine names the URL schemes it opens
    if engine is None:
        scheme = url.split("://", 1)[0].lower()
        raise ConfigError(f"unsupported source scheme {scheme!r} in {redact(url)!r}; use one of: {URL_FORMS}")
    source = source_class(engine)(name or source_name_for(url), url, description, limits=limits)
    source.knowledge_dir = knowledge
    return source


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

    def __iter__(self) -> Iterator[Source]:
        return iter(self._sources.values())

    def __len__(self) -> int:
        return len(self._sources)

    def names(self) -> list[str]:
        return list(self._sources)

    def close(self) -> None:
        for source in self._sources.values():
            source.close()
