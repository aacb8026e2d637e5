"""Ranking find_values candidates by their context (tools/values/context.py): the context's words weighted
like search_schema's, schemas spread, and a schema or tables given explicitly."""

from __future__ import annotations

import pytest

from flexsql.errors import NotFoundError
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


def test_find_values_schema_and_context(wh: ToolContext) -> None:
    bare = find_values(wh, FindValues(text="France"))
    assert {(m.table, m.column) for m in bare.matches} == {
        ("crm.customers", "country"),
        ("crm.suppliers", "country"),
        ("crm.orders", "ship_country"),
    }
    # the context names the supplier side: that column comes first, and the result says why
    ctx_hit = find_values(
        wh, FindValues(text="France", context="Which suppliers are based in France?")
    ).matches[0]
    assert (ctx_hit.table, ctx_hit.column) == ("crm.suppliers", "country")
    assert ctx_hit.context_words == ["suppliers"]
    assert (
        "context: 'suppliers'"
        in find_values(wh, FindValues(text="France", context="suppliers in France")).to_text()
    )
    shipped = find_values(wh, FindValues(text="France", context="orders shipped to France")).matches[0]
    assert (shipped.table, shipped.column) == ("crm.orders", "ship_country")
    only = find_values(wh, FindValues(text="France", schema="crm", tables=["crm.customers"]))
    assert [(m.table, m.column) for m in only.matches] == [("crm.customers", "country")]
    assert find_values(wh, FindValues(text="France", schema="analytics")).matches == []
    with pytest.raises(NotFoundError, match="schema 'crn' not found; did you mean: crm"):
        find_values(wh, FindValues(text="France", schema="crn"))
