"""Fixtures of the search_schema tests: a generated 300-table catalog in six schemas."""

from __future__ import annotations

import random

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext

SCHEMAS = ["sales", "hr", "inventory", "music", "sports", "finance"]

FILLER_A = [
    "audit",
    "batch",
    "buffer",
    "cache",
    "event",
    "feed",
    "job",
    "ledger",
    "log",
    "metric",
    "queue",
    "snapshot",
    "staging",
    "task",
    "vendor",
    "widget",
    "region",
    "channel",
    "device",
    "session",
]

FILLER_B = [
    "entries",
    "history",
    "runs",
    "items",
    "stats",
    "links",
    "flags",
    "notes",
    "versions",
    "archive",
    "backlog",
    "errors",
    "quotas",
    "tokens",
    "windows",
]

TARGETS = """
CREATE TABLE hr.employees (emp_id INTEGER PRIMARY KEY, first_name VARCHAR, last_name VARCHAR, salary DOUBLE,
                           dept_no INTEGER, hire_dt DATE);
CREATE TABLE hr.departments (dept_no INTEGER PRIMARY KEY, dept_name VARCHAR, mgr_id INTEGER);
CREATE TABLE inventory."stockItems" ("itemId" INTEGER, "itemName" VARCHAR, "unitQty" INTEGER, "reorderLevel" INTEGER,
                                     "warehouseLoc" VARCHAR);
CREATE TABLE sales.customers (cust_id INTEGER PRIMARY KEY, cust_name VARCHAR, "custAddr" VARCHAR, country VARCHAR);
CREATE TABLE sales.customer_orders (order_id INTEGER, cust_id INTEGER REFERENCES sales.customers (cust_id),
                                    order_dt DATE, total_amt DOUBLE);
CREATE TABLE music.singer (singer_id INTEGER PRIMARY KEY, name VARCHAR, country VARCHAR, birth_year INTEGER);
CREATE TABLE music.concert (concert_id INTEGER PRIMARY KEY, concert_name VARCHAR, theme VARCHAR, year INTEGER);
CREATE TABLE music.lineup (slot INTEGER, artist INTEGER REFERENCES music.singer (singer_id),
                           gig INTEGER REFERENCES music.concert (concert_id));
CREATE TABLE music.performance (perf_id INTEGER, singer_id INTEGER, rating DOUBLE, venue VARCHAR);
CREATE TABLE sports.performance (athlete_id INTEGER, score DOUBLE, event_name VARCHAR);
CREATE TABLE sports.athletes (athlete_id INTEGER, full_name VARCHAR, nationality VARCHAR);
COMMENT ON TABLE finance.ledger_entries IS 'general ledger postings';
INSERT INTO music.singer VALUES (1, 'Joe Sharp', 'Netherlands', 1970), (2, 'Timbaland', 'United States', 1972),
    (3, 'Justin Brown', 'France', 1981), (4, 'Rose White', 'France', 1986), (5, 'John Nizinik', 'France', 1960);
INSERT INTO sales.customers VALUES (1, 'Acme', '1 Main St', 'Canada'), (2, 'Globex', '5 Elm Rd', 'Mexico');
INSERT INTO sports.athletes VALUES (1, 'Ana Lopez', 'Spain'), (2, 'Kim Berg', 'Norway');
INSERT INTO music.concert VALUES (1, 'Auditions', 'Free choice', 2014), (2, 'Super bootcamp', 'Happy tonight', 2015);
"""


@pytest.fixture(scope="module")
def catalog_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """300 tables in six schemas: a few meaningful ones among generated filler tables."""
    import duckdb

    path = tmp_path_factory.mktemp("catalog") / "big_catalog.duckdb"
    conn = duckdb.connect(str(path))
    rng = random.Random(7)
    statements = [f"CREATE SCHEMA {s}" for s in SCHEMAS]
    names = [f"{a}_{b}" for a in FILLER_A for b in FILLER_B]
    rng.shuffle(names)
    for i, name in enumerate(names[:289]):
        schema = SCHEMAS[i % len(SCHEMAS)]
        cols = [
            "id INTEGER",
            "created_at TIMESTAMP",
            f"{name.split('_')[0]}_code VARCHAR",
            "amount DOUBLE",
            "note VARCHAR",
            f"{rng.choice(FILLER_A)}_ref INTEGER",
        ]
        statements.append(f"CREATE TABLE {schema}.{name} ({', '.join(cols)})")
    statements.append(
        "CREATE TABLE finance.ledger_entries (entry_id INTEGER, account_no VARCHAR, debit DOUBLE)"
    )
    statements += [s for s in TARGETS.split(";\n") if s.strip()]
    conn.execute("BEGIN")
    for statement in statements:
        conn.execute(statement)
    conn.execute("COMMIT")
    count = conn.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0]
    conn.close()
    assert count == 301
    return f"duckdb:///{path}"


@pytest.fixture
def big(catalog_url: str):
    source = open_source(catalog_url, name="big")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()
