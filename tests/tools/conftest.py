"""Fixtures shared by the tests of the tools (tests/tools/ and its folders)."""

from __future__ import annotations

import duckdb
import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from tests.support.cells import LONG


@pytest.fixture
def duck_ctx():
    """A ToolContext over an in-memory DuckDB."""
    src = open_source("duckdb://:memory:", name="mem")
    yield ToolContext(sources=SourceRegistry([src]))
    src.close()


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


@pytest.fixture()
def notes(tmp_path):
    """A DuckDB file whose `notes` table holds one value of LONG characters (row 2) among short ones."""
    path = tmp_path / "notes.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(
        f"CREATE TABLE notes AS SELECT i AS id, CASE WHEN i = 2 THEN repeat('x', {LONG}) ELSE 'short' END "
        "AS body FROM range(1, 4) t(i)"
    )
    conn.close()
    source = open_source(f"duckdb:///{path}", name="notes")
    yield source
    source.close()


FILLER_SCHEMAS = [f"dataset_{i:02d}" for i in range(12)]

EVENT_COLS = (
    "event_date VARCHAR, event_name VARCHAR, user_pseudo_id VARCHAR, platform VARCHAR, geo_country VARCHAR"
)


@pytest.fixture(scope="module")
def warehouse_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A warehouse-like DuckDB catalog: daily shards, survey vintages and data releases, look-alike
    tables, a small CRM with 'France' in three columns, and filler schemas; no foreign keys."""
    import duckdb

    path = tmp_path_factory.mktemp("wh") / "warehouse_like.duckdb"
    conn = duckdb.connect(str(path))
    stmts = [
        "CREATE SCHEMA analytics",
        "CREATE SCHEMA census",
        "CREATE SCHEMA clinical",
        "CREATE SCHEMA crm",
        "CREATE SCHEMA survey",
    ]
    # 31 daily shards of app events
    for day in range(1, 32):
        stmts.append(f"CREATE TABLE analytics.events_202101{day:02d} ({EVENT_COLS})")
    stmts.append("COMMENT ON TABLE analytics.events_20210131 IS 'app events exported daily'")
    # survey vintages by year and span, and data releases
    for year in range(2015, 2021):
        for span in (1, 5):
            stmts.append(
                f"CREATE TABLE census.state_{year}_{span}yr (geo_id VARCHAR, total_pop DOUBLE, "
                "median_income DOUBLE, households DOUBLE)"
            )
    for r in (24, 30, 35):
        stmts.append(
            f"CREATE TABLE clinical.clinical_gdc_r{r} (case_id VARCHAR, primary_diagnosis VARCHAR, "
            "vital_status VARCHAR, days_to_death DOUBLE)"
        )
    for yy in (14, 15, 16):
        stmts.append(
            f"CREATE TABLE survey.indiv{yy} (respondent_id VARCHAR, occupation VARCHAR, wage DOUBLE)"
        )
    # same shape, different columns: not a family
    stmts.append("CREATE TABLE crm.report_1 (a VARCHAR, b VARCHAR, c VARCHAR)")
    stmts.append("CREATE TABLE crm.report_2 (x DOUBLE, y DOUBLE, z DOUBLE)")
    stmts.append("CREATE TABLE crm.customers (customer_id VARCHAR, customer_name VARCHAR, country VARCHAR)")
    stmts.append("CREATE TABLE crm.suppliers (supplier_id VARCHAR, company VARCHAR, country VARCHAR)")
    stmts.append(
        "CREATE TABLE crm.orders (order_id VARCHAR, customer_id VARCHAR, ship_country VARCHAR, amount DOUBLE)"
    )
    stmts.append("INSERT INTO crm.customers VALUES ('c1', 'Acme', 'France'), ('c2', 'Globex', 'Spain')")
    stmts.append("INSERT INTO crm.suppliers VALUES ('s1', 'Bolt', 'France'), ('s2', 'Nut', 'France')")
    stmts.append("INSERT INTO crm.orders VALUES ('o1', 'c1', 'France', 10), ('o2', 'c2', 'Spain', 5)")
    for i, schema in enumerate(FILLER_SCHEMAS):
        stmts.append(f"CREATE SCHEMA {schema}")
        for j in range(8):
            stmts.append(
                f"CREATE TABLE {schema}.table_{chr(97 + j)}{chr(97 + i)} (k VARCHAR, v DOUBLE, note VARCHAR)"
            )
    conn.execute("BEGIN")
    for s in stmts:
        conn.execute(s)
    conn.execute("COMMIT")
    conn.close()
    return f"duckdb:///{path}"


@pytest.fixture
def wh(warehouse_url: str):
    """A ToolContext over `warehouse_url`."""
    source = open_source(warehouse_url, name="wh")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()
