"""Conditions given by a caller (sample_rows' `where`) parsed as one boolean expression, never pasted:
text such as `1=1; DROP TABLE t` cannot change the statement's shape. (Identifiers and literals are
quoted by each engine: `Engine.quote`, `Engine.quote_table`, `Engine.literal`.)"""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError

from flexsql.errors import InvalidArgument


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
    condition: exp.Expr = tree.args["where"].this
    return condition.sql(dialect=dialect)
