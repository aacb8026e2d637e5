"""list_tables and describe_table (tools/catalog.py) as plain functions: shard families, paging,
patterns, descriptions with keys, comments and examples (following a refresh), and a listing beside
a table whose name needs quoting."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import duckdb
import pytest

from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.tools import catalog
from flexsql.tools.catalog import DescribeTable, ListTables, describe_table, list_tables
from flexsql.tools.query import SampleRows, sample_rows
from tests.support.contexts import context


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


def _cities_duckdb(path: Path) -> None:
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE cities (name VARCHAR)")
    conn.execute("INSERT INTO cities VALUES ('Lyon'), ('Paris'), ('Nantes')")
    conn.close()


def test_describe_table_examples_follow_a_refresh(tmp_path: Path) -> None:
    path = tmp_path / "cities.duckdb"
    _cities_duckdb(path)
    ctx = context(f"duckdb:///{path}")
    assert "Nantes" in describe_table(ctx, DescribeTable(table="cities")).columns[0].examples
    ctx.source().close()
    conn = duckdb.connect(str(path))
    conn.execute("DELETE FROM cities")
    conn.execute("INSERT INTO cities VALUES ('Brest')")
    conn.close()
    ctx.source().catalog(refresh=True)
    assert describe_table(ctx, DescribeTable(table="cities")).columns[0].examples == ["Brest"]


def test_list_tables_survives_everything(tmp_path: Path) -> None:
    """A listing still works beside a table whose name needs quoting in every engine."""
    path = tmp_path / "q.sqlite"
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE "we""ird name" (x)')
    conn.commit()
    conn.close()
    ctx = context(f"sqlite:///{path}")
    assert [t.name for t in list_tables(ctx, ListTables()).tables] == ['main.we"ird name']
    assert sample_rows(ctx, SampleRows(table='"we""ird name"')).rows == []


def test_a_code_tables_descriptions_are_shown_whole_and_a_wide_tables_examples_short(tmp_path: Path) -> None:
    path = tmp_path / "codes.duckdb"
    long = "Left the warehouse or was handed over to the carrier for delivery"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE status_codes (code VARCHAR, description VARCHAR)")
    conn.execute("INSERT INTO status_codes VALUES ('S', ?)", [long])
    cols = ", ".join(f"c{i} VARCHAR" for i in range(40))
    conn.execute(f"CREATE TABLE wide ({cols})")
    conn.execute(f"INSERT INTO wide VALUES ({', '.join('?' * 40)})", [long] * 40)
    conn.close()
    ctx = context(f"duckdb:///{path}")
    codes = describe_table(ctx, DescribeTable(table="status_codes"))
    assert codes.columns[1].examples == [long]
    wide = describe_table(ctx, DescribeTable(table="wide"))
    assert all(len(e) <= 40 and e.endswith("…") for e in wide.columns[0].examples)


def _wide_duckdb(path: Path, columns: int) -> None:
    conn = duckdb.connect(str(path))
    names = [f"reported_detail_number_{i:03d}" for i in range(columns)]
    conn.execute("CREATE TABLE person_2015 (" + ", ".join(f"{n} BIGINT" for n in names) + ")")
    for n in names:  # the long code-table comments a warehouse's columns carry
        conn.execute(
            f"COMMENT ON COLUMN person_2015.{n} IS 'This data element records {n}: "
            "01 one, 02 two, 03 three, 97 other, 98 not reported, 99 unknown, and so on at length'"
        )
    conn.execute("INSERT INTO person_2015 VALUES (" + ", ".join(str(i) for i in range(columns)) + ")")
    conn.close()


@pytest.mark.parametrize("columns", [91, 110])
def test_a_wide_table_shows_every_column_within_the_text_bound(tmp_path: Path, columns: int) -> None:
    """A 91-column NHTSA table with long comments was cut at 4,000 characters: the columns past
    the cut (injury_severity, air_bag_deployed, …) never reached the model."""
    path = tmp_path / "wide.duckdb"
    _wide_duckdb(path, columns)
    ctx = context(f"duckdb:///{path}")
    text = describe_table(ctx, DescribeTable(table="person_2015")).to_text()
    assert len(text) <= 4_000
    assert all(f"reported_detail_number_{i:03d}" in text for i in range(columns))
    assert "left out to show every column" in text
    assert "truncated: true" not in text
    ctx.source().close()


def test_a_table_too_wide_for_names_says_how_many_and_where_the_rest_are(tmp_path: Path) -> None:
    path = tmp_path / "wide.duckdb"
    _wide_duckdb(path, 250)
    ctx = context(f"duckdb:///{path}")
    text = describe_table(ctx, DescribeTable(table="person_2015")).to_text()
    assert len(text) <= 4_000
    assert re.search(r"… \d+ not named here; search_schema finds them", text)
    ctx.source().close()
