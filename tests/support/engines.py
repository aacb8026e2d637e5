"""Build the same small test database on every engine and open it as a flexsql Source.

The data: a shop with customers, products, orders (foreign keys to both) and a view. Each engine
gets real DDL and rows: DuckDB and SQLite files, a fresh schema on the real PostgreSQL server
named by FLEXSQL_TEST_PG_DSN, and a database on a fakesnow server (the real Snowflake connector
over HTTP on loopback).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

ENGINES = ["duckdb", "sqlite", "postgres", "snowflake"]


def engine_params(*names: str) -> list[Any]:
    """`names` (default: every engine) as pytest parameters, PostgreSQL's marked `postgres` so that
    `pytest -m "not postgres"` leaves out what needs the server."""
    return [pytest.param(n, marks=pytest.mark.postgres) if n == "postgres" else n for n in names or ENGINES]


TYPES = {
    "int": {"duckdb": "INTEGER", "sqlite": "INTEGER", "postgres": "INTEGER", "snowflake": "INTEGER"},
    "text": {"duckdb": "VARCHAR", "sqlite": "TEXT", "postgres": "TEXT", "snowflake": "VARCHAR"},
    "float": {"duckdb": "DOUBLE", "sqlite": "REAL", "postgres": "DOUBLE PRECISION", "snowflake": "FLOAT"},
    "date": {"duckdb": "DATE", "sqlite": "TEXT", "postgres": "DATE", "snowflake": "DATE"},
}

# (table, comment, [(column, type, pk, comment)], [(column, ref_table, ref_column)], rows)
TABLES: list[
    tuple[
        str, str, list[tuple[str, str, bool, str | None]], list[tuple[str, str, str]], list[tuple[Any, ...]]
    ]
] = [
    (
        "customers",
        "people who bought something",
        [
            ("customer_id", "int", True, None),
            ("name", "text", False, "full name"),
            ("country", "text", False, None),
            ("segment", "text", False, "B2B or B2C code"),
        ],
        [],
        [
            (1, "Alice Martin", "France", "B2C"),
            (2, "Bob Stone", "Germany", "B2B"),
            (3, "Chloé Durand", "France", "B2C"),
            (4, "Dan Wu", None, "B2B"),
            (5, "Eve Adams", "united states", "B2C"),
        ],
    ),
    (
        "products",
        "catalog of products",
        [
            ("product_id", "int", True, None),
            ("title", "text", False, None),
            ("category", "text", False, None),
            ("price", "float", False, "unit price in EUR"),
        ],
        [],
        [
            (10, "Red Mug", "Kitchen", 8.5),
            (11, "Blue Lamp", "Lighting", 42.0),
            (12, "Green Chair", "Furniture", 120.0),
            (13, "Desk Lamp", "Lighting", 30.25),
        ],
    ),
    (
        "orders",
        "one row per order line",
        [
            ("order_id", "int", True, None),
            ("customer_id", "int", False, None),
            ("product_id", "int", False, None),
            ("quantity", "int", False, None),
            ("order_date", "date", False, None),
            ("status", "text", False, "S=shipped, P=pending, C=cancelled"),
        ],
        [("customer_id", "customers", "customer_id"), ("product_id", "products", "product_id")],
        [
            (100, 1, 10, 2, "2024-01-05", "S"),
            (101, 1, 11, 1, "2024-02-11", "S"),
            (102, 2, 12, 4, "2024-02-20", "P"),
            (103, 3, 10, 1, "2024-03-02", "S"),
            (104, 4, 13, 3, "2024-03-15", "C"),
            (105, 5, 11, 1, "2024-03-30", "S"),
            (106, 2, 10, 10, "2024-04-01", "S"),
        ],
    ),
]
VIEW_SQL = (
    "CREATE VIEW shipped_orders AS SELECT order_id, customer_id, quantity FROM orders WHERE status = 'S'"
)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def ddl(engine: str, prefix: str = "") -> list[str]:
    """CREATE, INSERT and COMMENT statements for one engine; `prefix` qualifies table names."""
    statements: list[str] = []
    for table, comment, columns, fks, rows in TABLES:
        parts = []
        for name, kind, pk, _ in columns:
            parts.append(f"{name} {TYPES[kind][engine]}" + (" PRIMARY KEY" if pk else ""))
        for col, ref_table, ref_col in fks:
            parts.append(f"FOREIGN KEY ({col}) REFERENCES {prefix}{ref_table}({ref_col})")
        statements.append(f"CREATE TABLE {prefix}{table} ({', '.join(parts)})")
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
        statements.append(f"INSERT INTO {prefix}{table} VALUES {values}")
        if engine != "sqlite":
            statements.append(f"COMMENT ON TABLE {prefix}{table} IS {_literal(comment)}")
            for name, _kind, _pk, col_comment in columns:
                if col_comment and engine != "snowflake":
                    statements.append(f"COMMENT ON COLUMN {prefix}{table}.{name} IS {_literal(col_comment)}")
    statements.append(
        VIEW_SQL.replace("VIEW shipped_orders", f"VIEW {prefix}shipped_orders").replace(
            "FROM orders", f"FROM {prefix}orders"
        )
    )
    return statements


def pg_dsn() -> str | None:
    """The test server's DSN; under pytest-xdist, a database of this worker's own on it (created once),
    because a source sees every schema of its database and two workers' shops would meet there."""
    dsn = os.environ.get("FLEXSQL_TEST_PG_DSN") or None
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if dsn is None or not worker:
        return dsn
    return _worker_database(dsn, worker)


@functools.cache
def _worker_database(dsn: str, worker: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(dsn)
    name = f"{parts.path.lstrip('/') or 'postgres'}_{worker}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def require_pg() -> str:
    dsn = pg_dsn()
    if dsn is None:
        reason = "FLEXSQL_TEST_PG_DSN is not set: PostgreSQL tests need a server (e.g. postgresql://postgres@127.0.0.1:5432/test)"
        if os.environ.get("FLEXSQL_TEST_REQUIRE_PG") == "1":
            pytest.fail(reason + " and FLEXSQL_TEST_REQUIRE_PG=1 forbids skipping")
        pytest.skip(reason)
    return dsn


def make_duckdb(directory: Path) -> str:
    import duckdb

    path = directory / "shop.duckdb"
    conn = duckdb.connect(str(path))
    for statement in ddl("duckdb"):
        conn.execute(statement)
    conn.close()
    return f"duckdb:///{path}"


def make_sqlite(directory: Path) -> str:
    import sqlite3

    path = directory / "shop.sqlite"
    conn = sqlite3.connect(path)
    for statement in ddl("sqlite"):
        conn.execute(statement)
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


@contextlib.contextmanager
def make_postgres() -> Iterator[str]:
    import psycopg

    dsn = require_pg()
    schema = "flexsql_t_" + uuid.uuid4().hex[:10]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        for statement in ddl("postgres"):
            conn.execute(statement)
        conn.execute("ANALYZE")
    sep = "&" if "?" in dsn else "?"
    try:
        yield f"{dsn}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def pg_schema(*statements: str) -> Iterator[tuple[str, str]]:
    """A fresh schema on the test server with `statements` run in it; yields (url, dsn)."""
    import psycopg

    dsn = require_pg()
    schema = "flexsql_e2_" + uuid.uuid4().hex[:8]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        for statement in statements:
            conn.execute(statement)
    sep = "&" if "?" in dsn else "?"
    try:
        yield f"{dsn}{sep}options=-csearch_path%3D{schema}", f"{dsn}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def make_pg_database() -> Iterator[str]:
    """A fresh database of its own on the test server (for fixtures whose schema names are fixed, so
    that two runs sharing the server cannot collide); yields its DSN and drops it afterwards."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    dsn = require_pg()
    database = "flexsql_t_" + uuid.uuid4().hex[:10]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    try:
        yield urlunsplit(urlsplit(dsn)._replace(path="/" + database))
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


_FAKESNOW: dict[str, Any] = {}


def fakesnow_server() -> dict[str, Any]:
    """One fakesnow server per test process (started on first use, a daemon thread)."""
    if "kwargs" not in _FAKESNOW:
        import logging

        import fakesnow

        logging.getLogger("uvicorn").setLevel(logging.WARNING)
        logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
        ctx = fakesnow.server()
        _FAKESNOW["ctx"] = ctx
        _FAKESNOW["kwargs"] = ctx.__enter__()
    return _FAKESNOW["kwargs"]


def fakesnow_database(database_prefix: str, schema: str, statements: Callable[[str], Iterable[str]]) -> str:
    """A fresh database on the fakesnow server holding `statements(prefix)` (prefix = "DB.SCHEMA."),
    and the snowflake:// URL flexsql reaches it by (the real connector, over HTTP)."""
    import snowflake.connector

    kwargs = fakesnow_server()
    database = database_prefix + uuid.uuid4().hex[:8].upper()
    conn = snowflake.connector.connect(**kwargs)
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {database}")
    cur.execute(f"CREATE SCHEMA {database}.{schema}")
    for statement in statements(f"{database}.{schema}."):
        cur.execute(statement)
    conn.close()
    return (
        f"snowflake://{kwargs['user']}:{kwargs['password']}@{kwargs['account']}/{database}/{schema}"
        f"?host={kwargs['host']}&port={kwargs['port']}&protocol={kwargs['protocol']}"
    )


@contextlib.contextmanager
def make_snowflake() -> Iterator[str]:
    yield fakesnow_database("DB_", "SHOP", lambda prefix: ddl("snowflake", prefix=prefix))


@contextlib.contextmanager
def url_from(engine: str, directory: Path, makers: Any) -> Iterator[str]:
    """The URL of a database built by `makers` (a module with make_duckdb, make_sqlite — files in
    `directory` — and the context managers make_postgres, make_snowflake) on `engine`."""
    if engine in ("duckdb", "sqlite"):
        yield getattr(makers, f"make_{engine}")(directory)
    elif engine in ("postgres", "snowflake"):
        with getattr(makers, f"make_{engine}")() as url:
            yield url
    else:
        raise ValueError(engine)


@contextlib.contextmanager
def engine_url(engine: str, directory: Path) -> Iterator[str]:
    with url_from(engine, directory, sys.modules[__name__]) as url:
        yield url


def content_checksum(engine: str, url: str) -> str:
    """A checksum of every table's rows and the table list, read with a plain (writable) driver
    connection, so a change by any route shows up."""
    from flexsql.tools.engines import open_source

    digest = hashlib.sha256()
    source = open_source(url)
    try:
        catalog = source.catalog(refresh=True)
        for table in sorted(catalog.tables, key=lambda t: t.qualified):
            digest.update(table.qualified.encode())
            digest.update(repr([c.name for c in table.columns]).encode())
            result = source.execute(f"SELECT * FROM {table.qualified}", guarded=False)
            digest.update(repr(sorted(map(repr, result.rows))).encode())
    finally:
        source.close()
    if engine in ("duckdb", "sqlite"):
        from flexsql.tools.engines.urls import file_path_of

        digest.update(Path(file_path_of(url)).read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def statements_database(
    engine: str,
    directory: Path,
    name: str,
    statements: Callable[[str, str], list[str]],
    extra_duckdb: Iterable[str] = (),
    snowflake: tuple[str, str] = ("", "S"),
) -> Iterator[str]:
    """The URL of a database made on `engine` from `statements(engine, prefix)`: a DuckDB or SQLite file
    named `name` in `directory`, a schema of the test PostgreSQL server, or a fakesnow database (the
    prefix names its database and schema there; `snowflake`: that database's name prefix, default
    NAME_, and its schema). `extra_duckdb`: statements for DuckDB only (STRUCT columns the others lack)."""
    if engine == "duckdb":
        import duckdb

        path = directory / f"{name}.duckdb"
        conn = duckdb.connect(str(path))
        for statement in [*statements(engine, ""), *extra_duckdb]:
            conn.execute(statement)
        conn.close()
        yield f"duckdb:///{path}"
    elif engine == "sqlite":
        import sqlite3

        path = directory / f"{name}.sqlite"
        lite = sqlite3.connect(path)
        for statement in statements(engine, ""):
            lite.execute(statement)
        lite.commit()
        lite.close()
        yield f"sqlite:///{path}"
    elif engine == "postgres":
        with pg_schema(*statements(engine, "")) as (url, _dsn):
            yield url
    elif engine == "snowflake":
        database, schema = snowflake
        yield fakesnow_database(
            database or f"{name.upper()}_", schema, lambda prefix: statements(engine, prefix)
        )
    else:
        raise ValueError(f"no such engine: {engine}")
