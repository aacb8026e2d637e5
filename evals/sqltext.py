"""Small facts about SQL text that scoring needs."""

from __future__ import annotations

from flexsql.evals.tasks import extract_sql
from flexsql.tools.sql import order as sql_order


def orders_result(sql: str, dialect: str) -> bool:
    """Whether the statement sorts its final result (a top-level ORDER BY), which makes row order
    part of the answer for the `ex` scorer. The same function as run_query's (tools/sql/order.py),
    after taking the SQL out of a prediction file the way the official evaluator does."""
    return sql_order.orders_result(extract_sql(sql), dialect)
