"""Schema and query tools as plain functions: families, paging, descriptions, join paths,
validation, result handles."""

from __future__ import annotations

import duckdb
import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import InvalidArgument, NotFoundError, RefusedError
from flexsql.tools import catalog, joins, query, validate
from flexsql.tools.catalog import DescribeTable, ListTables
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.joins import FindJoinPath
from flexsql.tools.query import FetchRows, RunQuery
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.validate import ValidateSql


@pytest.fixture
def warehouse(tmp_path):
    """A DuckDB file with a sharded family, a second schema, and joins only inferable by name."""
    path = tmp_path / "wh.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA analytics")
    for day in range(1, 32):
        con.execute(
            f"CREATE TABLE analytics.ga_sessions_202401{day:02d} (visit_id INTEGER, page VARCHAR, hits INTEGER)"
        )
    con.execute("CREATE TABLE analytics.ga_sessions_summary (visit_id INTEGER, note VARCHAR)")
    con.execute("CREATE TABLE customer (id INTEGER PRIMARY KEY, name VARCHAR)")
    con.execute("COMMENT ON TABLE customer IS 'registered buyers'")
    con.execute("CREATE TABLE invoice (invoice_id INTEGER PRIMARY KEY, customer_id INTEGER, total DOUBLE)")
    con.execute("CREATE TABLE invoice_line (line_id INTEGER, invoice_id INTEGER, sku VARCHAR)")
    con.execute("INSERT INTO customer VALUES (1, 'Ann'), (2, 'Bo')")
    con.execute("INSERT INTO invoice VALUES (10, 1, 9.5), (11, 2, 20.0)")
    con.execute("INSERT INTO invoice_line VALUES (100, 10, 'A-1'), (101, 11, 'B-2')")
    con.close()
    source = open_source(f"duckdb:///{path}", name="wh")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()


def test_list_tables_collapses_shard_families(warehouse):
    listing = catalog.list_tables(warehouse, ListTables(schema="analytics"))
    names = [t.name for t in listing.tables]
    assert names == ["analytics.ga_sessions_*", "analytics.ga_sessions_summary"]
    family = listing.tables[0]
    assert family.kind == "family" and family.family_size == 31
    assert family.family_range == "ga_sessions_20240101 … ga_sessions_20240131"
    assert "31 tables" in listing.to_text()


def test_list_tables_pages_with_cursor(warehouse):
    first = catalog.list_tables(warehouse, ListTables(limit=2))
    assert first.truncated and first.next_cursor and "truncated: true" in first.to_text()
    second = catalog.list_tables(warehouse, ListTables(limit=2, cursor=first.next_cursor))
    assert {t.name for t in first.tables}.isdisjoint({t.name for t in second.tables})
    everything = catalog.list_tables(warehouse, ListTables(limit=1000))
    assert everything.next_cursor is None and everything.total == len(everything.tables) == 5


def test_list_tables_pattern_and_bad_schema(warehouse):
    assert [t.name for t in catalog.list_tables(warehouse, ListTables(pattern="invoice*")).tables] == [
        "main.invoice",
        "main.invoice_line",
    ]
    with pytest.raises(InvalidArgument, match="schemas: "):
        catalog.list_tables(warehouse, ListTables(schema="nope"))


def test_describe_table_shows_keys_comments_examples_and_family(warehouse):
    desc = catalog.describe_table(warehouse, DescribeTable(table="CUSTOMER"))
    text = desc.to_text()
    assert "registered buyers" in text and "id INTEGER PK" in text and "e.g. Ann, Bo" in text
    shard = catalog.describe_table(warehouse, DescribeTable(table="analytics.ga_sessions_20240115"))
    assert shard.family and "31 tables" in shard.family


def test_describe_unknown_table_suggests(warehouse):
    with pytest.raises(NotFoundError, match="did you mean: main.invoice"):
        catalog.describe_table(warehouse, DescribeTable(table="invoices"))


def test_join_path_infers_from_names_and_goes_through_intermediate_tables(warehouse):
    path = joins.find_join_path(warehouse, FindJoinPath(tables=["invoice_line", "customer"]))
    conditions = [j.condition() for j in path.joins]
    assert path.connected and path.via == ["main.invoice"]
    assert any("invoice_id" in c for c in conditions) and any("customer_id" in c for c in conditions)
    assert all(j.kind == "inferred" for j in path.joins) and "check them" in (path.note or "")
    # the snippet runs
    result = query.run_query(warehouse, RunQuery(sql=f"SELECT count(*) {path.sql}"))
    assert result.rows == [[2]]


def test_join_path_reports_disconnected_tables(warehouse):
    path = joins.find_join_path(warehouse, FindJoinPath(tables=["customer", "analytics.ga_sessions_summary"]))
    assert not path.connected and "no join path" in path.to_text()


def test_run_query_preview_total_and_fetch(warehouse):
    out = query.run_query(warehouse, RunQuery(sql="SELECT * FROM range(1000) t(i)", max_rows=5))
    assert out.row_count == 5 and out.total_rows == 1000 and out.truncated
    more = query.fetch_rows(warehouse, FetchRows(result_id=out.result_id, offset=995, limit=50))
    assert [r[0] for r in more.rows] == [995, 996, 997, 998, 999] and not more.truncated
    with pytest.raises(InvalidArgument, match="past the end"):
        query.fetch_rows(warehouse, FetchRows(result_id=out.result_id, offset=5000))


def test_run_query_text_stays_within_budget_and_cuts_cells(warehouse):
    out = query.run_query(
        warehouse, RunQuery(sql="SELECT repeat('x', 5000) AS big, i FROM range(500) t(i)", max_rows=500)
    )
    text = out.to_text()
    assert len(text) <= 4000
    assert "…" in text and "truncated: true" in text


def test_run_query_keeps_only_store_rows_and_reports_lower_bound(tmp_path, warehouse):
    small = ToolContext(sources=warehouse.sources, limits=LimitsConfig(store_rows=1000))
    out = query.run_query(small, RunQuery(sql="SELECT * FROM range(5000)", max_rows=10))
    assert out.total_rows == 1001 and out.total_is_lower_bound
    assert "1001+" in out.to_text()


def test_empty_result_is_an_answer_with_a_hint(warehouse):
    out = query.run_query(warehouse, RunQuery(sql="SELECT * FROM customer WHERE name = 'ann'"))
    assert out.total_rows == 0 and "case" in out.to_text()


def test_run_query_refuses_writes(warehouse):
    with pytest.raises(RefusedError, match="INSERT"):
        query.run_query(warehouse, RunQuery(sql="INSERT INTO customer VALUES (3, 'Cy')"))


@pytest.mark.parametrize(
    "sql, kind, expected",
    [
        ("SELECT nam FROM customer", "unknown_column", "customer.name"),
        ("SELECT * FROM customr", "unknown_table", "customer"),
        ("SELECT * FROM customer WHERE", "syntax", None),
        ("DELETE FROM customer", "refused", None),
        ('SELECT * FROM customer WHERE name = "Ann"', "unknown_column", None),
    ],
)
def test_validate_sql_reports_issue_kinds(warehouse, sql, kind, expected):
    result = validate.validate_sql(warehouse, ValidateSql(sql=sql))
    assert not result.valid and result.issues[0].kind == kind
    assert result.issues[0].message  # every issue says what is wrong
    if expected is not None:  # the suggestion a user would take
        assert expected in " ".join(result.issues[0].suggestions)
    if kind == "refused":
        assert "DELETE" in result.issues[0].message


def test_validate_sql_hints_single_quotes(warehouse):
    result = validate.validate_sql(warehouse, ValidateSql(sql='SELECT * FROM customer WHERE name = "Ann"'))
    assert any("single quotes" in h for h in result.hints)


def test_validate_sql_accepts_good_sql_without_running_it(warehouse):
    result = validate.validate_sql(
        warehouse,
        ValidateSql(
            sql="SELECT c.name, sum(i.total) FROM customer c JOIN invoice i ON i.customer_id = c.id GROUP BY 1"
        ),
    )
    assert result.valid and "engine EXPLAIN" in result.checked_by
