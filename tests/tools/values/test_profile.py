"""profile_column (tools/values/profile.py): text, numeric and date columns, and booleans, JSON and
arrays profiled through their text."""

from __future__ import annotations

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.engines import engine_params


def test_profile_text_column(ctx: ToolContext) -> None:
    p = profile_column(ctx, ProfileColumn(table="customers", column="country"))
    assert (p.rows, p.nulls, p.null_fraction, p.distinct) == (5, 1, 0.2, 3)
    assert (p.min, p.max) == ("France", "united states")
    assert (p.top_values[0].value, p.top_values[0].count) == ("France", 2)
    assert p.patterns[0].pattern == "Aaaaaa" and p.patterns[0].count == 2
    assert (p.min_length, p.max_length) == (6, 13)
    text = p.to_text()
    assert "20.0%" in text and "patterns:" in text and not p.sampled


def test_profile_numeric_and_date_columns(ctx: ToolContext) -> None:
    q = profile_column(ctx, ProfileColumn(table="orders", column="quantity"))
    assert (q.rows, q.nulls, q.distinct, q.min, q.max) == (7, 0, 5, 1, 10)
    assert q.avg == pytest.approx(22 / 7)
    d = profile_column(ctx, ProfileColumn(table="orders", column="order_date"))
    assert str(d.min).startswith("2024-01-05") and str(d.max).startswith("2024-04-01")
    assert d.looks_like.get("date") == 1.0
    s = profile_column(ctx, ProfileColumn(table="orders", column="status"))
    assert s.patterns[0].pattern == "A" and s.patterns[0].count == 7


@pytest.mark.parametrize("engine", engine_params("duckdb", "postgres"))
def test_profile_and_distinct_on_booleans_json_and_arrays(shop, shop_url: str, engine: str) -> None:
    """min/max and GROUP BY do not exist for every type (PostgreSQL has no min(boolean) and cannot
    group json): such columns are profiled through their text."""
    ddl = [
        "CREATE TABLE flags (ok BOOLEAN, meta JSON, tags INTEGER[])",
        "INSERT INTO flags VALUES (true, '{\"a\": 1}', ARRAY[1, 2]), (false, '{\"a\": 2}', ARRAY[3]), "
        "(true, '{\"a\": 1}', ARRAY[1, 2]), (NULL, NULL, NULL)",
    ]
    shop.close()
    if engine == "duckdb":
        import duckdb

        from flexsql.tools.engines.urls import file_path_of

        conn = duckdb.connect(file_path_of(shop_url))
        for statement in ddl:
            conn.execute(statement)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(shop_url, autocommit=True) as conn:
            for statement in ddl:
                conn.execute(statement)
    source = open_source(shop_url, name="shop")
    try:
        ctx = ToolContext(sources=SourceRegistry([source]))
        ok = profile_column(ctx, ProfileColumn(table="flags", column="ok"))
        assert (ok.rows, ok.nulls, ok.distinct) == (4, 1, 2)
        assert {str(ok.min).lower(), str(ok.max).lower()} == {"false", "true"}
        meta = distinct_values(ctx, DistinctValues(table="flags", column="meta", contains="1"))
        assert [v.count for v in meta.values] == [2] and "1" in str(meta.values[0].value)
        tags = profile_column(ctx, ProfileColumn(table="flags", column="tags"))
        assert (tags.rows, tags.nulls, tags.distinct) == (4, 1, 2) and tags.top_values[0].count == 2
    finally:
        source.close()
