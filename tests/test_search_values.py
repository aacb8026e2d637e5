"""find_values ranking across many schemas: the context's words weighted like search_schema, schemas spread."""

from __future__ import annotations

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.find import FindValues, find_values


@pytest.fixture()
def ctx(tmp_path) -> ToolContext:
    import duckdb

    path = tmp_path / "many.duckdb"
    conn = duckdb.connect(str(path))
    for stmt in [
        "CREATE SCHEMA shop",
        "CREATE SCHEMA concert_singer",
        "CREATE TABLE shop.customers (name VARCHAR, country VARCHAR)",
        "CREATE TABLE shop.suppliers (company VARCHAR, country VARCHAR)",
        "CREATE TABLE shop.warehouses (city VARCHAR, country VARCHAR)",
        "CREATE TABLE concert_singer.singer (name VARCHAR, country VARCHAR)",
        "INSERT INTO shop.customers VALUES ('Acme', 'France'), ('Globex', 'France'), ('Initech', 'Spain')",
        "INSERT INTO shop.suppliers VALUES ('Bolt', 'France'), ('Nut', 'France')",
        "INSERT INTO shop.warehouses VALUES ('Lyon', 'France'), ('Nice', 'France')",
        "INSERT INTO concert_singer.singer VALUES ('Joe', 'France'), ('Ann', 'Peru')",
    ]:
        conn.execute(stmt)
    conn.close()
    source = open_source(f"duckdb:///{path}", name="many")
    context = ToolContext(sources=SourceRegistry([source]))
    yield context
    source.close()


def test_bare_literal_top_names_more_than_one_schema(ctx: ToolContext) -> None:
    result = find_values(ctx, FindValues(text="France", limit=3))
    assert {m.match for m in result.matches} == {"exact"}
    schemas = [m.table.split(".")[0] for m in result.matches]
    assert "concert_singer" in schemas  # not three siblings of the shop schema
    assert result.columns_matched == 4


def test_context_puts_the_schema_it_names_first(ctx: ToolContext) -> None:
    result = find_values(ctx, FindValues(text="France", limit=2, context="Which singers are from France?"))
    assert (result.matches[0].table, result.matches[0].column) == ("concert_singer.singer", "country")
    assert "singers" in result.matches[0].context_words or "singer" in result.matches[0].context_words
    assert "context:" in result.to_text()


def test_one_schema_keeps_its_own_order(ctx: ToolContext) -> None:
    result = find_values(ctx, FindValues(text="France", schema="shop", limit=3))
    assert [m.table for m in result.matches] == ["shop.customers", "shop.suppliers", "shop.warehouses"]
