"""The catalog: tables, columns and keys as an engine describes them, and name resolution
(bare, `schema.table` or `db.schema.table`, case-insensitive with the engine's folding rules)."""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, PrivateAttr

from flexsql.errors import NotFoundError
from flexsql.tools.engines.engine import engine_for
from flexsql.tools.engines.families import family_table, is_family_name
from flexsql.tools.engines.names import split_name

T = TypeVar("T")


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
    row_estimate: int | None = None  # rows: counted (rows_exact) or the engine's estimate
    rows_exact: bool = False
    rows_from: str | None = None  # where an estimate came from ("sqlite_stat1", "pg_class.reltuples")

    model_config = {"populate_by_name": True}
    # DuckDB: the catalog (database) name to prefix when the schema's name is also a catalog's name
    # (`sales.duckdb` holding schema `sales`), where "sales"."orders" is ambiguous to the engine
    sql_catalog: str | None = Field(default=None, exclude=True, repr=False)
    # a sharded family read as one table (tools/engines/families.py): its shards, oldest first; SQL names
    # it by its family reference, which Source.execute expands into their union
    shards: list[TableInfo] = Field(default_factory=list, exclude=True, repr=False)
    # a table seen through a nested column's path (tools/engines/paths.py): the FROM item that reads it
    from_sql: str | None = Field(default=None, exclude=True, repr=False)

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

    def derived(self, key: str, factory: Callable[[], T]) -> T:
        """The value `factory()` built once for this catalog under `key` (thread-safe: built at most once)."""
        with self._derived_lock:
            if key not in self._derived:
                self._derived[key] = factory()
            # one factory per key (the key names the module that owns it), so the entry is what it makes
            made: T = self._derived[key]
            return made

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
        if is_family_name(parts[-1][0]):
            family = family_table(self, name)
            if family is not None:
                return family
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
        engine = engine_for(dialect)
    for have, (want, quoted) in zip(parts[-len(wanted) :], wanted, strict=True):
        if not quoted and dialect is not None:
            folded = engine.fold(want)
            if folded is None:  # names are case-insensitive (DuckDB, SQLite): every spelling is exact
                if have.lower() != want.lower():
                    return False
                continue
            want = folded
        if have != want:
            return False
    return True
