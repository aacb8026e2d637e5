"""What a value tool reads: the table and column it names, or the tables find_values searches.

The errors say the expected form ('orders', 'sales.orders', 'sales.*') so the caller can retry.
"""

from __future__ import annotations

import difflib

from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.tools.engines import Catalog, Source, TableInfo
from flexsql.tools.engines.paths import path_table
from flexsql.tools.runtime.context import ToolContext

MAX_TEXT_CHARS = 200
MAX_NAMED_TABLES = 20  # tables named one by one up to this many: their unindexed columns are checked live


def resolve_column(
    ctx: ToolContext, table: str, column: str, source: str | None
) -> tuple[Source, TableInfo, str, str]:
    if not isinstance(table, str) or not table.strip():
        raise InvalidArgument("table is required: give a table name such as 'orders' or 'sales.orders'")
    if not isinstance(column, str) or not column.strip():
        raise InvalidArgument(
            "column is required: give a column name of the table (describe_table lists them)"
        )
    src = ctx.source(source)
    info = src.catalog().resolve(table)
    through = path_table(src.engine, info, column)  # a path inside a nested column reads as a column
    if through is not None:
        return src, through, through.columns[0].name, through.columns[0].type
    col = info.column(column.strip())
    return src, info, col.name, col.type


def resolve_scope(catalog: Catalog, tables: list[str] | None) -> tuple[list[TableInfo], bool]:
    """The tables to search: the named ones (`schema.*` for a whole schema), or every base table;
    and whether the caller named a few tables one by one (then every column of them is checked)."""
    if tables is None or tables == []:
        return [t for t in catalog.tables if t.kind == "table"], False
    if isinstance(tables, str):
        tables = [tables]
    if len(tables) > 100:
        raise InvalidArgument(
            f"tables lists {len(tables)} names; give at most 100 (or a schema as 'schema.*')"
        )
    chosen: dict[str, TableInfo] = {}
    wildcard = False
    for name in tables:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument(
                "tables must be a list of table names such as ['orders', 'sales.customers']"
            )
        if name.strip().endswith(".*"):
            schema = name.strip()[:-2].split(".")[-1].strip('"').lower()
            hits = [t for t in catalog.tables if t.schema_name.lower() == schema]
            if not hits:
                raise NotFoundError(
                    f"schema {schema!r} not found; schemas: {', '.join(catalog.schemas()[:20])}"
                )
            wildcard = True
            for t in hits:
                chosen[t.qualified] = t
        else:
            info = catalog.resolve(name)
            chosen[info.qualified] = info
    return list(chosen.values()), not wildcard and len(chosen) <= MAX_NAMED_TABLES


def in_schema(catalog: Catalog, scope: list[TableInfo], schema: str) -> list[TableInfo]:
    if not isinstance(schema, str) or not schema.strip():
        raise InvalidArgument("schema must be a schema name such as 'sales' (list_schemas lists them)")
    wanted = schema.strip().strip('"').lower()
    kept = [
        t
        for t in scope
        if t.schema_name.lower() == wanted
        or ".".join(p for p in (t.database, t.schema_name) if p).lower() == wanted
    ]
    if not kept:
        if not any(t.schema_name.lower() == wanted for t in catalog.tables):
            close = difflib.get_close_matches(wanted, [s.lower() for s in catalog.schemas()], n=5, cutoff=0.5)
            hint = (
                f"did you mean: {', '.join(close)}?"
                if close
                else f"schemas: {', '.join(catalog.schemas()[:20])}"
            )
            raise NotFoundError(f"schema {schema!r} not found; {hint}")
        raise InvalidArgument(f"none of the tables named is in schema {schema!r}: drop tables= or schema=")
    return kept
