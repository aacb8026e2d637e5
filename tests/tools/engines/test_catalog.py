"""The catalog and name resolution (tools/engines/catalog.py): tables, views, keys and comments on every
engine, cached until a refresh, near names suggested, PostgreSQL names differing only in case, and
dotted table names."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from flexsql.errors import NotFoundError
from flexsql.tools.catalog import DescribeTable, describe_table
from flexsql.tools.query import SampleRows, sample_rows
from flexsql.tools.validate import ValidateSql, validate_sql
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from tests.support.contexts import context
from tests.support.engines import pg_schema


@pytest.mark.postgres
def test_postgres_names_differing_only_in_case() -> None:
    with pg_schema(
        "CREATE TABLE orders (id int, status text)",
        'CREATE TABLE "Orders" (id int, "Status" text)',
        "INSERT INTO orders VALUES (1, 'low')",
        "INSERT INTO \"Orders\" VALUES (2, 'UP')",
    ) as (url, _):
        ctx = context(url)
        try:
            schema = ctx.source().catalog().default_schema
            assert describe_table(ctx, DescribeTable(table="orders")).table == f"{schema}.orders"
            assert describe_table(ctx, DescribeTable(table='"Orders"')).table == f"{schema}.Orders"
            assert (
                describe_table(ctx, DescribeTable(table="Orders")).table == f"{schema}.Orders"
            )  # as list_tables prints it
            assert describe_table(ctx, DescribeTable(table=f"{schema}.orders")).table == f"{schema}.orders"
            assert sample_rows(ctx, SampleRows(table="orders")).rows == [[1, "low"]]
            assert sample_rows(ctx, SampleRows(table=f'{schema}."Orders"')).rows == [[2, "UP"]]
            assert (
                distinct_values(ctx, DistinctValues(table="Orders", column="Status")).values[0].value == "UP"
            )
            assert validate_sql(ctx, ValidateSql(sql="SELECT * FROM orders")).valid
            assert validate_sql(ctx, ValidateSql(sql='SELECT "Status" FROM "Orders"')).valid
            assert validate_sql(
                ctx, ValidateSql(sql="SELECT status FROM Orders")
            ).valid  # unquoted folds to orders
            bad = validate_sql(ctx, ValidateSql(sql="SELECT * FROM ordersx"))
            assert not bad.valid and bad.issues[0].kind == "unknown_table"
        finally:
            ctx.source().close()


def test_dotted_table_names_resolve(tmp_path: Path) -> None:
    path = tmp_path / "d.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute('CREATE TABLE "web.events" (id INTEGER)')
    conn.execute("CREATE TABLE events (id INTEGER)")
    conn.execute('INSERT INTO "web.events" VALUES (7)')
    conn.close()
    ctx = context(f"duckdb:///{path}")
    for name in ('"web.events"', "main.web.events", 'main."web.events"', "web.events"):
        assert describe_table(ctx, DescribeTable(table=name)).table == "main.web.events", name
    assert sample_rows(ctx, SampleRows(table='"web.events"')).rows == [[7]]
    assert describe_table(ctx, DescribeTable(table="events")).table == "main.events"
    with pytest.raises(NotFoundError, match="not found"):
        describe_table(ctx, DescribeTable(table="nosuch.web.events"))


def test_catalog_lists_tables_views_keys_and_comments(shop, engine):
    catalog = shop.catalog()
    names = {t.name.lower() for t in catalog.tables}
    assert {"customers", "orders", "products", "shipped_orders"} <= names
    orders = catalog.resolve("orders")
    assert [c.name.lower() for c in orders.columns][:3] == ["order_id", "customer_id", "product_id"]
    assert [c.lower() for c in orders.primary_key] == ["order_id"]
    view = catalog.resolve("SHIPPED_ORDERS")
    assert view.kind == "view"
    if engine != "snowflake":  # fakesnow has no foreign-key metadata
        refs = {fk.ref_table.lower() for fk in orders.foreign_keys}
        assert refs == {"customers", "products"}
    if engine != "sqlite":  # SQLite has no comments
        assert catalog.resolve("customers").comment == "people who bought something"
    customers = catalog.resolve("customers")
    assert customers.row_estimate is None or customers.row_estimate <= 1000


def test_catalog_is_cached_until_refresh(shop):
    first = shop.catalog()
    assert shop.catalog() is first
    assert shop.catalog(refresh=True) is not first


def test_resolve_suggests_near_names(shop):
    with pytest.raises(NotFoundError, match="(?i)did you mean.*orders"):
        shop.catalog().resolve("ordrs")
