"""Building SQL from catalog names and user arguments without string-pasting user text:
identifiers are quoted exactly as stored, conditions are parsed as expressions."""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError

from flexsql.errors import InvalidArgument
from flexsql.tools.engines import TableInfo
from flexsql.tools.engines.traits import traits_for


def quote_ident(name: str, dialect: str) -> str:
    return traits_for(dialect).quote(name)


def quote_table(table: TableInfo, dialect: str) -> str:
    parts = [p for p in (table.database, table.schema_name, table.name) if p]
    if not traits_for(dialect).schema_in_names:  # one database per file: the schema is always main
        parts = [table.name]
    elif table.sql_catalog and not table.database:  # a schema named like a catalog: say which catalog
        parts = [table.sql_catalog, *parts]
    return ".".join(quote_ident(p, dialect) for p in parts)


def quote_literal(value: str, dialect: str) -> str:
    return exp.Literal.string(value).sql(dialect=dialect)


def as_text(column_sql: str, dialect: str) -> str:
    """A column cast to text, whatever its type (for value matching)."""
    return traits_for(dialect).as_text(column_sql)


def parse_condition(where: str, dialect: str) -> str:
    """Parse `where` as one boolean expression (not a statement) and regenerate it, so text such
    as `1=1; DROP TABLE t` or `1=1 UNION SELECT …` cannot change the statement's shape."""
    if not where or not where.strip():
        raise InvalidArgument("where is empty: give a condition such as status = 'S', or omit it")
    try:
        tree = parse_one(f"SELECT 1 WHERE {where}", read=dialect)
    except (SqlglotError, RecursionError, ValueError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InvalidArgument(
            f"where is not a valid {dialect} condition ({first}); example: country = 'France'"
        ) from None
    extra = [k for k, v in tree.args.items() if v and k not in ("expressions", "where")]
    if not isinstance(tree, exp.Select) or tree.args.get("where") is None or extra:
        raise InvalidArgument("where must be a single condition (no ORDER BY, LIMIT, UNION or other clauses)")
    return tree.args["where"].this.sql(dialect=dialect)
