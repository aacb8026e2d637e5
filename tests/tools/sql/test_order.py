"""Does a query order its result (tools/sql/order.py): one answer for run_query and the `ex` scorer."""

from __future__ import annotations

import pytest

ORDER_CASES = [
    ("SELECT a FROM t ORDER BY a", True),
    ("(SELECT a FROM t ORDER BY a)", True),
    ("(SELECT a FROM t) ORDER BY a", True),
    ("```sql\nSELECT a FROM t ORDER BY a;\n```", True),
    ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1", True),
    ("SELECT a FROM t", False),
    ("SELECT * FROM (SELECT a FROM t ORDER BY a)", False),
    ("WITH x AS (SELECT a FROM t ORDER BY a) SELECT * FROM x", False),
    ("SELECT row_number() OVER (ORDER BY a) FROM t", False),
    ("```sql\nSELECT a FROM t\n```", False),
]


@pytest.mark.parametrize(("sql", "ordered"), ORDER_CASES)
def test_one_order_function_for_run_query_and_the_ex_scorer(sql, ordered):
    from flexsql.evals.sqltext import orders_result
    from flexsql.tools.query import has_top_level_order

    assert has_top_level_order(sql, "duckdb") is ordered
    assert orders_result(sql, "duckdb") is ordered
