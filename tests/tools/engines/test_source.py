"""The Source surface (tools/engines/source.py), the same on all four engines: execution and clear
engine errors."""

from __future__ import annotations

import pytest

from flexsql.errors import QueryError


def test_execute_returns_rows_and_counts(shop):
    result = shop.execute("SELECT order_id, quantity FROM orders ORDER BY order_id")
    assert [c.lower() for c in result.columns] == ["order_id", "quantity"]
    assert result.rows[0] == (100, 2)
    assert result.total_rows == 7 and not result.truncated and not result.total_is_lower_bound


def test_engine_error_is_clear(shop):
    with pytest.raises(QueryError) as info:
        shop.execute("SELECT no_such_column FROM orders")
    assert "no_such_column" in str(info.value).lower()
