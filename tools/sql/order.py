"""Does a query order its result? One answer for run_query / compare_results, the `ex` scorer and the
Snowflake wrapper, so "ordered" means the same thing everywhere.

A result is ordered when its outermost query sorts: `SELECT … ORDER BY a`, a set operation with a
final ORDER BY, and the same inside redundant parentheses (`(SELECT … ORDER BY a)`). An ORDER BY in
a subquery, a CTE or a window does not order the result. SQL in a Markdown fence (```sql … ```) is
read from the fence. Text that does not parse falls back to a scan for ORDER BY outside parentheses.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from flexsql.tools.sql.fences import sql_blocks

_DEPTH_SCAN = re.compile(r"\(|\)|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|\border\s+by\b", re.IGNORECASE)


def unfenced(sql: str) -> str:
    """The SQL of the first fenced block when the text has one, else the text; no trailing `;`."""
    blocks = sql_blocks(sql, unnamed=True)
    text = blocks[0] if blocks else sql
    return text.strip().rstrip(";").strip()


def outermost_query(tree: exp.Expr | None) -> exp.Expr | None:
    """The query under any redundant parentheses, keeping the first ORDER BY met on the way in."""
    while isinstance(tree, exp.Subquery | exp.Paren) and not tree.args.get("order"):
        tree = tree.this
    return tree


def top_level_order(tree: exp.Expr | None) -> exp.Order | None:
    """The ORDER BY that sorts the statement's result, if any."""
    node = outermost_query(tree)
    order = node.args.get("order") if node is not None else None
    return order if isinstance(order, exp.Order) else None


def orders_result(sql: str, dialect: str | None = None) -> bool:
    """Whether the statement sorts its final result, which makes row order part of the answer."""
    if not isinstance(sql, str):
        return False
    text = unfenced(sql)
    try:
        tree = sqlglot.parse_one(text, read=dialect or None)
    except Exception:  # sqlglot raises several types on odd text; fall back to a scan
        return _order_by_at_depth_zero(text)
    return top_level_order(tree) is not None


def _order_by_at_depth_zero(text: str) -> bool:
    depth = 0
    for token in _DEPTH_SCAN.finditer(text):
        value = token.group(0)
        if value == "(":
            depth += 1
        elif value == ")":
            depth -= 1
        elif value[0] not in "'\"-" and depth <= 0:
            return True
    return False
