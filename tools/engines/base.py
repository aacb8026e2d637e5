"""The Source abstraction: one adapter per engine, all with the same small surface.

A source introspects its catalog (cached, with an explicit refresh), runs one guarded read-only
statement with a timeout that cancels it on the engine, and fetches a capped number of rows and
bytes while reporting the true total (or a lower bound). Engine adapters implement the
`_open`, `_load_catalog`, `_run` and `_cancel` hooks; everything else is shared here.
"""

from __future__ import annotations

import difflib
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field, PrivateAttr

from flexsql.errors import NotFoundError, QueryError, QueryTimeout

if TYPE_CHECKING:
    from flexsql.tools.engines.traits import EngineTraits

DEFAULT_MAX_ROWS = 1_000
DEFAULT_MAX_BYTES = 8_000_000
DEFAULT_COUNT_LIMIT = 100_000
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_CELL_BYTES = 1024 * 1024


class Column(BaseModel):
    name: str
    type: str
    nullable: bool | None = None
    primary_key: bool = False
    comment: str | None = None


class ForeignKey(BaseModel):
    columns: list[str]
    ref_schema: str | None = None
    ref_table: str
    ref_columns: list[str]


class TableInfo(BaseModel):
    """One table or view. `database` is only set on engines with a three-part namespace."""

    database: str | None = None
    schema_name: str = Field(default="", alias="schema")
    name: str
    kind: Literal["table", "view"] = "table"
    columns: list[Column] = []
    foreign_keys: list[ForeignKey] = []
    comment: str | None = None
    row_estimate: int | None = None

    model_config = {"populate_by_name": True}
    # DuckDB: the catalog (database) name to prefix when the schema's name is also a catalog's name
    # (`sales.duckdb` holding schema `sales`), where "sales"."orders" is ambiguous to the engine
    sql_catalog: str | None = Field(default=None, exclude=True, repr=False)

    @property
    def qualified(self) -> str:
        parts = [p for p in (self.database, self.schema_name, self.name) if p]
        return ".".join(parts)

    @property
    def primary_key(self) -> list[str]:
        return [c.name for c in self.columns if c.primary_key]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        lowered = name.lower()
        for col in self.columns:
            if col.name.lower() == lowered:
                return col
        names = [c.name for c in self.columns]
        close = difflib.get_close_matches(name, names, n=5, cutoff=0.5) or names[:10]
        raise NotFoundError(
            f"column {name!r} not found in {self.qualified}; did you mean: {', '.join(close)}? "
            "(describe_table lists every column)"
        )


class Catalog(BaseModel):
    """Every table and view of a source, in a stable order (schema, name)."""

    tables: list[TableInfo]
    default_schema: str | None = None
    loaded_at: float = 0.0
    load_seconds: float = 0.0
    # indexes computed from this catalog (join graph, search index, examples): they live and die with it,
    # so `Source.catalog(refresh=True)` drops them with the old catalog instead of serving them stale
    _derived: dict[str, Any] = PrivateAttr(default_factory=dict)
    _derived_lock: threading.RLock = PrivateAttr(default_factory=threading.RLock)

    def derived(self, key: str, factory: Any) -> Any:
        """The value `factory()` built once for this catalog under `key` (thread-safe: built at most once)."""
        with self._derived_lock:
            if key not in self._derived:
                self._derived[key] = factory()
            return self._derived[key]

    def schemas(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in self.tables:
            seen.setdefault(t.schema_name, None)
        return list(seen)

    def resolve(self, name: str, dialect: str | None = None) -> TableInfo:
        """Find a table from a bare, `schema.table` or `db.schema.table` name.

        Names match case-insensitively; when that is ambiguous (PostgreSQL's `orders` and
        `"Orders"`), the exact spelling wins: for a tool argument the name as typed, for a name read
        from SQL (`dialect` given) the engine's folding rules (unquoted folds, quoted is exact).
        A dot inside a part is kept when the part is quoted (`"web.events"`) or when the whole text
        is the table's own or qualified name."""
        parts = split_name(name)
        if not parts or not parts[-1][0]:
            raise NotFoundError("empty table name: give a table name such as 'orders' or 'sales.orders'")
        hits = [t for t in self.tables if _name_matches(t, [p.lower() for p, _ in parts])]
        raw = name.strip()
        for t in self.tables:  # dotted table names given without quotes
            if (
                t not in hits
                and "." in t.name
                and (
                    raw.lower() == t.qualified.lower()
                    or raw.lower() == t.name.lower()
                    or raw.lower().endswith("." + t.name.lower())
                    and _name_matches(
                        t, [p.lower() for p in raw[: -len(t.name) - 1].split(".")] + [t.name.lower()]
                    )
                )
            ):
                hits.append(t)
        if len(hits) > 1:
            exact = [
                t
                for t in hits
                if _name_matches_exactly(t, parts, dialect)
                or (dialect is None and raw in (t.qualified, t.name))
            ]
            if exact:
                hits = exact
        if len(hits) > 1 and self.default_schema:
            preferred = [t for t in hits if t.schema_name.lower() == self.default_schema.lower()]
            if len(preferred) == 1:
                hits = preferred
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            options = ", ".join(t.qualified for t in hits[:10])
            raise NotFoundError(
                f"table name {name!r} is ambiguous: it matches {options}; qualify it with its schema "
                'or quote it with its exact case ("Orders")'
            )
        raise NotFoundError(f"table {name!r} not found; {self.suggest(name)}")

    def suggest(self, name: str) -> str:
        bare = name.split(".")[-1].lower()
        by_name: dict[str, list[str]] = {}
        for t in self.tables:
            by_name.setdefault(t.name.lower(), []).append(t.qualified)
        close = difflib.get_close_matches(bare, list(by_name), n=5, cutoff=0.6)
        if not close:
            close = [n for n in by_name if bare and (bare in n or n in bare)][:5]
        if not close:
            return "use list_tables or search_schema to see the available tables"
        names = [q for n in close for q in by_name[n][:2]]
        return "did you mean: " + ", ".join(names) + "?"


def _name_matches(table: TableInfo, wanted: list[str]) -> bool:
    parts = [p.lower() for p in (table.database, table.schema_name, table.name) if p]
    return len(wanted) <= len(parts) and parts[-len(wanted) :] == wanted


def _name_matches_exactly(table: TableInfo, wanted: list[tuple[str, bool]], dialect: str | None) -> bool:
    """Each part spelled exactly: quoted parts as written; unquoted ones as written (a tool
    argument) or folded the engine's way (a name from SQL, `dialect` given)."""
    parts = [p for p in (table.database, table.schema_name, table.name) if p]
    if len(wanted) > len(parts):
        return False
    if dialect is not None:
        from flexsql.tools.engines.traits import traits_for

        traits = traits_for(dialect)
    for have, (want, quoted) in zip(parts[-len(wanted) :], wanted, strict=True):
        if not quoted and dialect is not None:
            folded = traits.fold(want)
            if folded is None:  # names are case-insensitive (DuckDB, SQLite): every spelling is exact
                if have.lower() != want.lower():
                    return False
                continue
            want = folded
        if have != want:
            return False
    return True


def split_name(name: str) -> list[tuple[str, bool]]:
    """`web."Events.2024"` -> [('web', False), ('Events.2024', True)]: dots split parts except inside
    double quotes, backticks or brackets; each part says whether it was quoted."""
    parts: list[tuple[str, bool]] = []
    current: list[str] = []
    quoted = False
    close: str | None = None
    text = name.strip()
    i = 0
    while i < len(text):
        ch = text[i]
        if close is not None:
            if ch == close:
                if close == '"' and text[i + 1 : i + 2] == '"':  # "" inside quotes is one quote
                    current.append('"')
                    i += 2
                    continue
                close = None
            else:
                current.append(ch)
        elif ch in '"`[':
            close = {"[": "]"}.get(ch, ch)
            quoted = True
        elif ch == ".":
            parts.append(("".join(current).strip(), quoted))
            current, quoted = [], False
        else:
            current.append(ch)
        i += 1
    parts.append(("".join(current).strip(), quoted))
    return parts


class QueryResult(BaseModel):
    """Rows of one statement: at most `max_rows` kept, the total counted up to a limit."""

    columns: list[str]
    types: list[str] = []
    rows: list[tuple[Any, ...]]
    total_rows: int
    total_is_lower_bound: bool = False
    truncated: bool = False  # rows were dropped: `rows` holds fewer than the total
    truncated_reason: str | None = None  # why rows were dropped and/or cells cut
    cells_cut: int = 0  # text, binary or nested cells over max_cell_bytes, kept cut with a marker
    elapsed_ms: float = 0.0


class SafetyReport(BaseModel):
    """What protects a source, shown by `flexsql sources`; warnings name what to do."""

    read_only_engine: bool
    measures: list[str]
    warnings: list[str] = []


@dataclass
class FetchLimits:
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int = DEFAULT_MAX_BYTES
    count_limit: int = DEFAULT_COUNT_LIMIT
    max_cell_bytes: int = DEFAULT_MAX_CELL_BYTES


@dataclass(frozen=True)
class FetchCut:
    """What a fetch left out: why rows stopped (None: every counted row is kept) and how many cells
    were cut. Rows and cells are different news for the reader ('rows 1-20 of 4,000' against 'this
    cell is a prefix'), so they are kept apart."""

    rows: str | None = None
    cells: int = 0
    max_cell_bytes: int = 0

    def __str__(self) -> str:
        note = f"{self.cells} cell(s) over max_cell_bytes={self.max_cell_bytes} cut" if self.cells else None
        return "; ".join(x for x in (self.rows, note) if x)


@dataclass
class EngineLimits:
    """The engines' own memory budget, from [limits] (the server sets it with `set_engine_limits`)."""

    memory_mb: int = 2048
    temp_mb: int = 10240


engine_limits = EngineLimits()


def set_engine_limits(memory_mb: int, temp_mb: int) -> None:
    """Apply [limits] engine_memory_mb / engine_temp_mb to sources opened from now on."""
    engine_limits.memory_mb, engine_limits.temp_mb = memory_mb, temp_mb


_CELL_TYPES = (str, bytes, bytearray, memoryview)
_NESTED_TYPES = (list, tuple, dict)  # DuckDB lists/arrays, structs and maps; PostgreSQL arrays, json


def nested_size(value: Any, cap: int) -> int:
    """Approximate printed bytes of a list/tuple/dict cell, counting stops once past `cap` (a
    100M-element list costs no more to measure than a small one)."""
    size = 2
    items = value.items() if isinstance(value, dict) else value
    for item in items:
        parts = item if isinstance(value, dict) else (item,)
        for part in parts:
            if part is None or isinstance(part, bool | int | float):
                size += 12  # a printed number and its separator, roughly
            elif isinstance(part, _CELL_TYPES):
                size += len(part) + 2
            elif isinstance(part, _NESTED_TYPES):
                size += nested_size(part, cap - size)
            else:
                size += len(str(part)) + 2
        if size > cap:
            return size
    return size


def _cell_size(value: Any, cap: int) -> int:
    if value.__class__ in _CELL_TYPES:
        return len(value)
    if isinstance(value, _NESTED_TYPES):
        return nested_size(value, cap)
    return 0


def _item_size(value: Any, cap: int) -> int:
    """One element's size as `nested_size` counts it."""
    return nested_size([value], cap) - 2


def cut_nested(value: Any, max_bytes: int) -> Any:
    """A list/dict cell cut to its first elements that fit in `max_bytes`, then a marker naming how
    many were dropped: the last element of a list is the string '… N more elements cut', a dict gets
    the key '…' with 'N more keys cut'. Elements that are themselves too big are cut in turn."""
    is_dict = isinstance(value, dict)
    items = list(value.items()) if is_dict else value
    kept: list[Any] = []
    size = 2 + 64  # room for the marker, so a cut cell is under the cap when measured again
    for item in items:
        part_cap = max(max_bytes - size, 16)
        if is_dict:
            key, inner = item
            inner = _cut_cell(inner, part_cap)
            cost = 4 + len(str(key)) + _item_size(inner, part_cap)
            item = (key, inner)
        else:
            item = _cut_cell(item, part_cap)
            cost = _item_size(item, part_cap)
        if size + cost > max_bytes:
            break
        kept.append(item)
        size += cost
    dropped = len(items) - len(kept)
    if is_dict:
        out = dict(kept)
        if dropped:
            out["…"] = f"{dropped} more keys cut"
        return out
    if dropped:
        kept.append(f"… {dropped} more elements cut")
    return tuple(kept) if isinstance(value, tuple) else kept


def _cut_cell(value: Any, max_bytes: int) -> Any:
    if value.__class__ in _CELL_TYPES:
        if len(value) <= max_bytes:
            return value
        return value[: max_bytes - 1] + "…" if isinstance(value, str) else bytes(value[:max_bytes])
    if isinstance(value, _NESTED_TYPES) and nested_size(value, max_bytes) > max_bytes:
        return cut_nested(value, max_bytes)
    return value


def _is_cuttable(value: Any) -> bool:
    return value.__class__ in _CELL_TYPES or isinstance(value, _NESTED_TYPES)


def cut_big_cells(rows: list[tuple[Any, ...]], max_cell_bytes: int) -> int:
    """Cut, in place, every text, binary, list or dict cell bigger than `max_cell_bytes`; returns
    how many. Looks column-wise (C-level len over each text column) to stay cheap on million-row
    results; lists and dicts are measured with a count that stops at the cap."""
    if not rows:
        return 0
    cut = 0
    for j, column in enumerate(zip(*rows, strict=False)):
        if not (len(column) <= 64 or any(_is_cuttable(v) for v in column[:64])):
            continue  # not a text or nested column (sampled): numbers and dates cannot be huge
        lengths = [
            len(v)
            if v.__class__ in _CELL_TYPES
            else nested_size(v, max_cell_bytes)
            if v.__class__ in _NESTED_TYPES
            else 0
            for v in column
        ]
        if max(lengths, default=0) <= max_cell_bytes:
            continue
        for i, n in enumerate(lengths):
            if n > max_cell_bytes:
                row = list(rows[i])
                row[j] = _cut_cell(row[j], max_cell_bytes)
                rows[i] = tuple(row)
                cut += 1
    return cut


def approx_size(row: Sequence[Any]) -> int:
    """A cheap estimate of a row's size in bytes (what it costs to keep and to print)."""
    size = 8
    for cell in row:
        if cell is None:
            size += 1
        elif isinstance(cell, str | bytes):
            size += len(cell) + 1
        elif isinstance(cell, int | float | bool):
            size += 8
        elif isinstance(cell, _NESTED_TYPES):
            size += nested_size(cell, DEFAULT_MAX_BYTES)
        else:
            size += len(str(cell)) + 1
    return size


def fetch_batches(cursor: Any, size: int = 2048) -> Iterator[Sequence[Sequence[Any]]]:
    """A DB-API cursor's rows in batches (every driver we use has fetchmany)."""
    while True:
        batch = cursor.fetchmany(size)
        if not batch:
            return
        yield batch


def estimate_size(rows: Sequence[Sequence[Any]]) -> int:
    """Approximate bytes of many rows from a sample of at most 64 (exact for short lists)."""
    n = len(rows)
    if n <= 64:
        return sum(approx_size(r) for r in rows)
    step = n // 64
    sample = rows[::step][:64]
    return int(sum(approx_size(r) for r in sample) * n / len(sample))


def collect(
    batches: Iterator[Sequence[Sequence[Any]]], limits: FetchLimits
) -> tuple[list[tuple[Any, ...]], int, bool, FetchCut | None]:
    """Keep rows up to the row and byte caps, keep counting up to `count_limit`.

    Works a batch at a time (row-by-row Python costs seconds on million-row results); the byte
    cap uses a sampled size estimate per batch and goes row by row only in the batch that crosses it.
    Returns (rows, counted, more_than_counted, what was cut or None).
    """
    rows: list[tuple[Any, ...]] = []
    kept_bytes = 0
    counted = 0
    reason: str | None = None
    cells_cut = 0
    for batch in batches:
        if counted + len(batch) >= limits.count_limit:
            batch = batch[: limits.count_limit - counted]
            more = True
        else:
            more = False
        counted += len(batch)
        if reason is None:
            room = limits.max_rows - len(rows)
            take = batch if len(batch) <= room else batch[:room]
            size = estimate_size(take)
            if kept_bytes + size <= limits.max_bytes:
                rows.extend(r if isinstance(r, tuple) else tuple(r) for r in take)
                kept_bytes += size
            else:
                for row in take:
                    row = tuple(row)
                    if approx_size(row) > limits.max_cell_bytes:  # a huge cell: cut it, keep the row
                        cell_rows = [row]
                        cells_cut += cut_big_cells(cell_rows, limits.max_cell_bytes)
                        row = cell_rows[0]
                    kept_bytes += approx_size(row)
                    if kept_bytes > limits.max_bytes:
                        reason = f"max_bytes={limits.max_bytes}"
                        break
                    rows.append(tuple(row))
            if reason is None and len(take) < len(batch):
                reason = f"max_rows={limits.max_rows}"
        if more:
            return rows, counted, True, _cut(rows, limits, reason or f"max_rows={limits.max_rows}", cells_cut)
    return rows, counted, False, _cut(rows, limits, reason, cells_cut)


def _cut(rows: list[tuple[Any, ...]], limits: FetchLimits, reason: str | None, cells: int) -> FetchCut | None:
    cells += cut_big_cells(rows, limits.max_cell_bytes)
    if reason is None and not cells:
        return None
    return FetchCut(rows=reason, cells=cells, max_cell_bytes=limits.max_cell_bytes)


class Source(ABC):
    """A named, lazily opened, read-only database."""

    dialect: str = ""
    engine: str = ""
    traits: ClassVar[EngineTraits]  # what tools need to know about the engine's SQL (traits.py)

    def __init__(self, name: str, url: str, description: str = "") -> None:
        self.name = name
        self._url = url
        self.description = description
        self._catalog: Catalog | None = None
        self._catalog_lock = threading.Lock()

    # -- public surface ------------------------------------------------------------------------
    @property
    def display_url(self) -> str:
        """The URL with any password or token removed: safe for logs and tool output."""
        from flexsql.tools.engines.urls import redact

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
        from flexsql.tools.sql.guard import check_sql

        text = check_sql(sql, self.dialect) if guarded else sql
        limits = limits or FetchLimits()
        started = time.perf_counter()
        try:
            columns, types, rows, counted, more, cut = self._run(text, timeout_s, limits)
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
        )

    def safety(self) -> SafetyReport:
        return SafetyReport(read_only_engine=True, measures=[])

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the source reopens lazily on next use."""

    def data_versions(self, tables: list[TableInfo]) -> dict[str, str] | None:
        """A token per table (by qualified name) that changes when its rows may have changed, from
        what the engine offers cheaply; None when it offers nothing (then only an age limit tells
        the value index to rebuild)."""
        return None

    # -- engine hooks ---------------------------------------------------------------------------
    @abstractmethod
    def _load_catalog(self) -> Catalog: ...

    @abstractmethod
    def _run(
        self, sql: str, timeout_s: float, limits: FetchLimits
    ) -> tuple[list[str], list[str], list[tuple[Any, ...]], int, bool, FetchCut | None]:
        """Execute one statement read-only, cancelling it at `timeout_s`; returns
        (columns, types, rows, counted, more_than_counted, what collect() cut)."""

    def _clean_error(self, exc: BaseException) -> str:
        from flexsql.tools.engines.urls import scrub_secrets

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


class CancelHooks:
    """Cancel callbacks of the statements running on behalf of one tool call. The server sets it
    (through a context variable, which worker threads inherit) so that a client's cancellation
    stops the query on the engine, not just the waiting coroutine."""

    def __init__(self) -> None:
        self._hooks: set[Any] = set()
        self._lock = threading.Lock()
        self.cancelled = False

    def add(self, hook: Any) -> None:
        with self._lock:
            self._hooks.add(hook)
            run_now = self.cancelled
        if run_now:
            hook()

    def discard(self, hook: Any) -> None:
        with self._lock:
            self._hooks.discard(hook)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()


active_cancel_hooks: ContextVar[CancelHooks | None] = ContextVar("flexsql_cancel_hooks", default=None)


class Deadline:
    """Calls `cancel` once if the guarded block runs past `seconds` (or when the surrounding tool
    call is cancelled); `fired` says whether it did."""

    def __init__(self, seconds: float, cancel: Any) -> None:
        self.fired = False
        self._cancel = cancel
        self._timer = threading.Timer(max(seconds, 0.001), self._fire)
        self._timer.daemon = True
        self._hooks = active_cancel_hooks.get()

    def _fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        try:
            self._cancel()
        except Exception:  # cancelling a finished query is harmless
            pass

    def __enter__(self) -> Deadline:
        self._timer.start()
        if self._hooks is not None:
            self._hooks.add(self._fire)
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        if self._hooks is not None:
            self._hooks.discard(self._fire)


def timeout_error(seconds: float) -> QueryTimeout:
    return QueryTimeout(
        f"query cancelled after {seconds:g} s (timeout_s={seconds:g}); simplify it, add filters or LIMIT, "
        "or raise timeout_s"
    )
