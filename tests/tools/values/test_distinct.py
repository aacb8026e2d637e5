"""distinct_values (tools/values/distinct.py): values by frequency, `contains` case-insensitive and
literal, and a ten-megabyte value."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.contexts import context


def test_ten_megabyte_value(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (body TEXT, iv TEXT)")
    conn.execute("INSERT INTO t VALUES (printf('%.10000000c', 'x'), 'a'), ('short', 'b')")
    conn.commit()
    conn.close()
    ctx = context(f"sqlite:///{path}")
    dv = distinct_values(ctx, DistinctValues(table="t", column="body"))
    assert dv.distinct_total == 2 and len(dv.values) == 2
    assert max(len(str(v.value)) for v in dv.values) <= 1001
    profile = profile_column(ctx, ProfileColumn(table="t", column="body"))
    assert profile.rows == 2 and profile.distinct == 2 and profile.max_length == 10_000_000


def test_distinct_values_by_frequency(ctx: ToolContext) -> None:
    result = distinct_values(ctx, DistinctValues(table="customers", column="country"))
    assert (result.values[0].value, result.values[0].count) == ("France", 2)
    assert {(v.value, v.count) for v in result.values} == {
        ("France", 2),
        ("Germany", 1),
        ("united states", 1),
        (None, 1),
    }
    assert result.distinct_total == 4 and not result.truncated and not result.sampled
    assert "France | 2" in result.to_text()


def test_distinct_values_contains_is_case_insensitive_and_literal(ctx: ToolContext) -> None:
    assert {
        v.value
        for v in distinct_values(
            ctx, DistinctValues(table="customers", column="country", contains="AN")
        ).values
    } == {
        "France",
        "Germany",
    }
    assert distinct_values(ctx, DistinctValues(table="customers", column="name", contains="%")).values == []
    assert distinct_values(ctx, DistinctValues(table="customers", column="name", contains="_")).values == []
    limited = distinct_values(ctx, DistinctValues(table="customers", column="name", limit=2))
    assert len(limited.values) == 2 and limited.truncated and limited.distinct_total == 5
    assert "truncated: true" in limited.to_text()
