"""The Source abstraction: one adapter per engine, all with the same small surface.

A source introspects its catalog (cached, with an explicit refresh), runs one guarded read-only
statement with a timeout that cancels it on the engine, and fetches a capped number of rows and
bytes while reporting the true total (or a lower bound). Engine adapters implement the
`_load_catalog` and `_run` hooks; everything else is shared here. What the engine's SQL looks like
is its `Engine` (engine.py); the guard checks every statement with the engine's rules.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, SkipValidation

from flexsql.config import LimitsConfig
from flexsql.errors import QueryError, QueryTimeout
from flexsql.tools.engines.catalog import Catalog, TableInfo
from flexsql.tools.engines.engine import Engine
from flexsql.tools.engines.families import FamilyRead, expand_families
from flexsql.tools.engines.fetch import FetchCut, FetchLimits
from flexsql.tools.engines.gate import StatementGate
from flexsql.tools.engines.urls import redact, scrub_secrets
from flexsql.tools.sql.guard import check_sql

DEFAULT_TIMEOUT_S = LimitsConfig().query_timeout_s  # a direct call's timeout: [limits]' default

RunOutput = tuple[list[str], list[str], list[tuple[Any, ...]], int, bool, FetchCut | None]
"""What an engine's `_run` returns: (columns, types, rows, counted, more_than_counted, what collect() cut)."""


class QueryResult(BaseModel):
    """Rows of one statement: at most `max_rows` kept, the total counted up to a limit."""

    columns: list[str]
    types: list[str] = []
    # as collect() kept them: validating would copy every row's tuple and the list (a million rows held
    # twice while the result is built, and pymalloc's arenas left half empty after)
    rows: SkipValidation[list[tuple[Any, ...]]]
    total_rows: int
    total_is_lower_bound: bool = False
    truncated: bool = False  # rows were dropped: `rows` holds fewer than the total
    truncated_reason: str | None = None  # why rows were dropped and/or cells cut
    cells_cut: int = 0  # text, binary or nested cells over max_cell_bytes, kept cut with a marker
    elapsed_ms: float = 0.0
    families: list[FamilyRead] = []  # the family references (GA_SESSIONS_*) it read, and their shards
    expanded_sql: str | None = None  # what ran, when family references were expanded


@dataclass(frozen=True)
class EngineMemory:
    """What an engine running inside this process holds in its memory, by its own count, and the
    limit it keeps that count under ([limits] engine_memory_mb): what /healthz reports beside the
    result store, so that the server's RSS can be told apart."""

    used_bytes: int
    limit_bytes: int


class SafetyReport(BaseModel):
    """What protects a source, shown by `flexsql sources`; warnings name what to do."""

    read_only_engine: bool
    measures: list[str]
    warnings: list[str] = []


class Source(ABC):
    """A named, lazily opened, read-only database."""

    engine: ClassVar[Engine]  # what the engine's SQL looks like (engine.py)

    def __init__(
        self, name: str, url: str, description: str = "", limits: LimitsConfig | None = None
    ) -> None:
        self.name = name
        self._url = url
        self.description = description
        # the folder of the source's knowledge store, when configured (tools/knowledge/store.py)
        self.knowledge_dir: str | None = None
        # [limits]: the engine's own memory and spill budget is applied when a connection opens
        self.limits = limits or LimitsConfig()
        self._catalog: Catalog | None = None
        self._catalog_lock = threading.Lock()
        # statements at once: this source's own, until a server puts all its sources behind one gate
        self.gate = StatementGate(self.limits.server_statements)

    # -- public surface ------------------------------------------------------------------------
    @property
    def dialect(self) -> str:
        return self.engine.dialect

    @property
    def display_url(self) -> str:
        """The URL with any password or token removed: safe for logs and tool output."""
        return redact(self._url)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.display_url}>"

    def catalog(self, refresh: bool = False) -> Catalog:
        """The cached catalog; `refresh=True` reads it again from the engine."""
        with self._catalog_lock:
            if self._catalog is None or refresh:
                started = time.perf_counter()
                catalog = self._load_catalog()
                catalog.loaded_at = time.time()
                catalog.load_seconds = time.perf_counter() - started
                self._catalog = catalog
            return self._catalog

    def execute(
        self,
        sql: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        limits: FetchLimits | None = None,
        guarded: bool = True,
    ) -> QueryResult:
        """Run one read statement. The guard checks it first unless `guarded=False`, which only
        tests use to prove the engine-level read-only layer holds on its own."""
        # family references (EVENTS_2024*) become the union of their shards first: the guard checks,
        # and the engine runs, the SQL as expanded
        expanded, reads = self.expand(sql)
        text = check_sql(expanded, self.engine) if guarded else expanded
        limits = limits or FetchLimits()
        started = time.perf_counter()
        try:
            with self.gate.slot(timeout_s) as waited:
                # the wait for a slot counts against the statement's timeout (a moment's wait does not)
                left = timeout_s if waited < 0.01 else max(timeout_s - waited, 0.001)
                columns, types, rows, counted, more, cut = self._run(text, left, limits)
        except QueryTimeout:
            raise
        except QueryError:
            raise
        except Exception as exc:  # engine errors become one clear type, without secrets
            raise QueryError(self._clean_error(exc)) from None
        return QueryResult(
            columns=columns,
            types=types,
            rows=rows,
            total_rows=counted,
            total_is_lower_bound=more,
            truncated=cut is not None and cut.rows is not None,
            truncated_reason=str(cut) if cut is not None else None,
            cells_cut=cut.cells if cut is not None else 0,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
            families=reads,
            expanded_sql=expanded if reads else None,
        )

    def expand(self, sql: str) -> tuple[str, list[FamilyRead]]:
        """`sql` with its family references (`EVENTS_*`, `EVENTS_2024*`) replaced by the union of their
        shards ([limits] family_shards at most each), and what each read; unchanged when it has none."""
        return expand_families(sql, self.catalog, self.engine, self.limits.family_shards)

    def safety(self) -> SafetyReport:
        return SafetyReport(read_only_engine=True, measures=[])

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the source reopens lazily on next use."""

    def engine_memory(self) -> EngineMemory | None:
        """The engine's memory in this process (an embedded engine's, by its own count); None for an
        engine in another process or with nothing to say."""
        return None

    def data_versions(self, tables: list[TableInfo]) -> dict[str, str] | None:
        """A token per table (by qualified name) that changes when its rows may have changed, from
        what the engine offers cheaply; None when it offers nothing (then only an age limit tells
        the value index to rebuild)."""
        return None

    # -- engine hooks ---------------------------------------------------------------------------
    @abstractmethod
    def _load_catalog(self) -> Catalog: ...

    @abstractmethod
    def _run(self, sql: str, timeout_s: float, limits: FetchLimits) -> RunOutput:
        """Execute one statement read-only, cancelling it at `timeout_s`; returns
        (columns, types, rows, counted, more_than_counted, what collect() cut)."""

    def _clean_error(self, exc: BaseException) -> str:
        text = str(exc).strip() or type(exc).__name__
        return scrub_secrets(text, self._url)


def file_data_versions(path: str | None, tables: list[TableInfo]) -> dict[str, str] | None:
    """Data versions of a one-file database: the size and modification time of the file and its
    write-ahead log (DuckDB's `.wal`, SQLite's `-wal`), the same for every table."""
    if not path or path == ":memory:":
        return None
    stamps = []
    for candidate in (Path(path), Path(f"{path}-wal"), Path(f"{path}.wal")):
        try:
            st = candidate.stat()
        except OSError:
            continue
        stamps.append(f"{st.st_size}:{st.st_mtime_ns}")
    token = ",".join(stamps)
    return {t.qualified: token for t in tables}
