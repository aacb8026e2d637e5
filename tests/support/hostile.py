"""Hostile-data fixtures: a database per engine holding the values real databases hold and that
break tools built on the happy path — every type the engine has, decimals too big and too small
for a float, NaN and ±infinity, intervals, enums, json, arrays, ranges, money, BLOBs, one 10 MB
text, names that differ only in case or hold a dot, a sharded family and a dangling view.

Each builder returns a source URL; `HOSTILE_TABLES` lists what every test expects to find.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.support.engines import fakesnow_database, require_pg, url_from

BIG_TEXT_CHARS = 10_000_000

_DUCKDB = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    """CREATE TABLE every_type (
        id INTEGER, b BOOLEAN, ti TINYINT, si SMALLINT, bi BIGINT, hi HUGEINT, ui UBIGINT,
        r REAL, d DOUBLE, small_dec DECIMAL(38,30), big_dec DECIMAL(38,0), dec10 DECIMAL(38,10),
        txt VARCHAR, bl BLOB, dt DATE, ts TIMESTAMP, ts_ns TIMESTAMP_NS, tstz TIMESTAMPTZ, tm TIME,
        iv INTERVAL, u UUID, js JSON, arr INTEGER[], st STRUCT(a INTEGER, b VARCHAR), mp MAP(VARCHAR, INTEGER),
        m mood, bits BIT)""",
    """INSERT INTO every_type VALUES
        (1, true, 127, 32767, 9223372036854775807, 170141183460469231731687303715884105727, 18446744073709551615,
         0.1, 1e-20, 0.000000000000000000000000000001, 99999999999999999999999999999999999999,
         9999999999999999999999999999.9999999999, 'NULL', '\\x00\\xff'::BLOB, 'infinity'::DATE, 'infinity'::TIMESTAMP,
         '2024-01-01 12:00:00.123456789'::TIMESTAMP_NS, '-infinity'::TIMESTAMPTZ, '23:59:59.999999', INTERVAL 1 MONTH,
         '00000000-0000-0000-0000-000000000001', '{"a": [1, 2]}', [1, 2, NULL], {'a': 1, 'b': 'x'}, MAP {'k': 1},
         'happy', '1010'::BIT),
        (2, NULL, -128, -32768, -9223372036854775808, -170141183460469231731687303715884105727, 0,
         'nan'::REAL, 'inf'::DOUBLE, -0.000000000000000000000000000001, -99999999999999999999999999999999999999,
         9999999999999999999999999999.9999999999, NULL, NULL, '-infinity'::DATE, '-infinity'::TIMESTAMP,
         NULL, NULL, NULL, INTERVAL '1 year 2 months 3 days 04:05:06', NULL, 'null', [], NULL, NULL, 'sad', NULL),
        (3, false, 0, 0, 0, 0, 1, '-inf'::REAL, 'nan'::DOUBLE, 0, 0, 0, '', ''::BLOB, '2024-02-29', '2024-02-29 00:00:00',
         NULL, '2024-02-29 00:00:00+00', '00:00:00', INTERVAL 0 SECOND, NULL, '[]', NULL, NULL, NULL, 'ok', NULL)""",
    "CREATE TABLE big_text (id INTEGER, body VARCHAR)",
    f"INSERT INTO big_text VALUES (1, repeat('x', {BIG_TEXT_CHARS})), (2, 'short')",
    # DuckDB compares names case-insensitively: "Orders" and orders are one table there
    'CREATE TABLE "Orders" (id INTEGER, "Status" VARCHAR)',
    "INSERT INTO \"Orders\" VALUES (2, 'upper-shipped')",
    'CREATE TABLE "dotted.name" (id INTEGER, "col.with.dot" VARCHAR)',
    "INSERT INTO \"dotted.name\" VALUES (1, 'dot-value')",
    "CREATE SCHEMA web",
    *[f"CREATE TABLE web.events_2024010{i} (id INTEGER, kind VARCHAR)" for i in range(1, 4)],
    *[f"INSERT INTO web.events_2024010{i} VALUES ({i}, 'click')" for i in range(1, 4)],
]


def make_duckdb(directory: Path, name: str = "hostile.duckdb") -> str:
    import duckdb

    path = directory / name
    conn = duckdb.connect(str(path))
    for statement in _DUCKDB:
        conn.execute(statement)
    conn.close()
    return f"duckdb:///{path}"


_SQLITE = [
    """CREATE TABLE every_type (id INTEGER PRIMARY KEY, i INTEGER, r REAL, t TEXT, bl BLOB, n NUMERIC, anything,
        dt DATE, big_int INTEGER)""",
    """INSERT INTO every_type VALUES
        (1, 9223372036854775807, 0.1, 'NULL', x'00ff', 1e-20, 'mixed', '2024-02-29', -9223372036854775808),
        (2, NULL, 9e999, NULL, NULL, 123456789012345678901234567890, 42, 'not a date', 0),
        (3, 0, -9e999, '', x'', 0.000000000000000000001, x'01', NULL, 1)""",
    "CREATE TABLE big_text (id INTEGER, body TEXT)",
    f"INSERT INTO big_text VALUES (1, printf('%.{BIG_TEXT_CHARS}c', 'x')), (2, 'short')",
    "CREATE TABLE gone (id INTEGER)",
    "CREATE VIEW dangling AS SELECT id FROM gone",
    "DROP TABLE gone",
    'CREATE TABLE "dotted.name" (id INTEGER, "col.with.dot" TEXT)',
    "INSERT INTO \"dotted.name\" VALUES (1, 'dot-value')",
    *[f"CREATE TABLE events_2024010{i} (id INTEGER, kind TEXT)" for i in range(1, 4)],
    *[f"INSERT INTO events_2024010{i} VALUES ({i}, 'click')" for i in range(1, 4)],
]


def make_sqlite(directory: Path) -> str:
    path = directory / "hostile.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA legacy_alter_table = ON")  # keep the view whose table is dropped (dangling)
    for statement in _SQLITE:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


_POSTGRES = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    """CREATE TABLE every_type (
        id integer, b boolean, si smallint, bi bigint, r real, d double precision, num numeric, small_dec numeric(38,30),
        big_dec numeric(38,0), dec10 numeric(38,10), txt text, vc varchar(10), ch char(3), bl bytea, dt date,
        ts timestamp, tstz timestamptz, tm time, tmtz timetz, iv interval, u uuid, js json, jb jsonb, arr integer[],
        tarr text[], rng int4range, money_col money, pt point, inet_col inet, m mood, bits bit(4), xml_col xml,
        tsv tsvector)""",
    """INSERT INTO every_type VALUES
        (1, true, 32767, 9223372036854775807, 0.1, 1e-20, 'NaN', 0.000000000000000000000000000001,
         99999999999999999999999999999999999999, 9999999999999999999999999999.9999999999, 'NULL', 'abc', 'ab',
         '\\x00ff', 'infinity', 'infinity', '-infinity', '24:00', '24:00+02', '1 month', '00000000-0000-0000-0000-000000000001',
         '{"a": [1, 2]}', '{"k": "v"}', '{1,2,NULL}', '{"x","NULL"}', '[1,10)', '12.34', '(1,2)', '10.0.0.1', 'happy',
         B'1010', '<a>1</a>', 'fat cat'),
        (2, NULL, -32768, -9223372036854775808, 'NaN', 'Infinity', 'Infinity', -0.000000000000000000000000000001,
         -99999999999999999999999999999999999999, 9999999999999999999999999999.9999999999, NULL, NULL, NULL, NULL,
         '-infinity', '-infinity', NULL, '00:00', NULL, '1 year 2 mons 3 days 04:05:06', NULL, 'null', 'null', '{}', '{}',
         'empty', '-0.01', NULL, NULL, 'sad', NULL, NULL, NULL),
        (3, false, 0, 0, '-Infinity', '-Infinity', '-Infinity', 0, 0, 0, '', '', '', '', '2024-02-29',
         '2024-02-29 00:00', '2024-02-29 00:00+00', '12:00', '12:00+00', '0', NULL, '[]', '[]', NULL, NULL, NULL, '0', NULL,
         NULL, 'ok', NULL, NULL, NULL)""",
    "CREATE TABLE big_text (id integer, body text)",
    f"INSERT INTO big_text VALUES (1, repeat('x', {BIG_TEXT_CHARS})), (2, 'short')",
    "CREATE TABLE orders (id integer, status text)",
    'CREATE TABLE "Orders" (id integer, "Status" text, status text)',
    "INSERT INTO orders VALUES (1, 'lower-shipped')",
    "INSERT INTO \"Orders\" VALUES (2, 'upper-shipped', 'other')",
    'CREATE TABLE "dotted.name" (id integer, "col.with.dot" text)',
    "INSERT INTO \"dotted.name\" VALUES (1, 'dot-value')",
    *[f"CREATE TABLE events_2024010{i} (id integer, kind text)" for i in range(1, 4)],
    *[f"INSERT INTO events_2024010{i} VALUES ({i}, 'click')" for i in range(1, 4)],
    "ANALYZE",
]


@contextlib.contextmanager
def make_postgres() -> Iterator[str]:
    """A fresh schema on the test server (FLEXSQL_TEST_PG_DSN) holding the hostile tables."""
    import psycopg

    dsn = require_pg()
    schema = "flexsql_h_" + uuid.uuid4().hex[:10]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        for statement in _POSTGRES:
            conn.execute(statement)
    sep = "&" if "?" in dsn else "?"
    try:
        yield f"{dsn}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# Snowflake through fakesnow (DuckDB behind Snowflake's wire protocol), so only what fakesnow can
# hold: NUMBER(38,0) is a BIGINT there (values past int64 fail to insert), so the big integers are
# the int64 extremes and 2^53+1; names compare case-insensitively as in DuckDB, so "Orders" cannot
# sit next to ORDERS (it stands alone, with a quoted mixed-case column); no intervals, enums,
# ranges, money or dangling views;
# TIMESTAMP_TZ offsets must be written without a space; a NULL TIMESTAMP_NTZ/TZ comes back from
# fakesnow as 1970-01-01, so those columns hold the extreme timestamps instead of NULL.
_SNOWFLAKE = [
    """CREATE TABLE {p}every_type (id INTEGER, b BOOLEAN, big NUMBER(38,0), small_dec NUMBER(38,19), f FLOAT,
        txt VARCHAR, bl BINARY, dt DATE, ts TIMESTAMP_NTZ, tstz TIMESTAMP_TZ, tm TIME, v VARIANT, o OBJECT, a ARRAY)""",
    """INSERT INTO {p}every_type SELECT 1, true, 9223372036854775807, 0.0000000000000000001, 'NaN'::FLOAT, 'NULL',
        TO_BINARY('00ff', 'HEX'), '2024-02-29', '2024-02-29 12:00:00.123456', '2024-02-29 12:00:00+02:00', '23:59:59',
        PARSE_JSON('{{"a": [1, 2]}}'), OBJECT_CONSTRUCT('k', 1), ARRAY_CONSTRUCT(1, 2, NULL)""",
    """INSERT INTO {p}every_type SELECT 2, NULL, -9223372036854775807, -1234567890123456789.1234567890123456789,
        'inf'::FLOAT, NULL, NULL, NULL, '9999-12-31 23:59:59.999999', '0001-01-01 00:00:00Z', NULL, PARSE_JSON('null'),
        NULL, ARRAY_CONSTRUCT()""",
    """INSERT INTO {p}every_type SELECT 3, false, 9007199254740993, 0, '-inf'::FLOAT, '', TO_BINARY('', 'HEX'),
        '1970-01-01', '1970-01-01 00:00:00', '1970-01-01 00:00:00Z', '00:00:00', PARSE_JSON('[]'), OBJECT_CONSTRUCT(),
        NULL""",
    "CREATE TABLE {p}big_text (id INTEGER, body VARCHAR)",
    f"INSERT INTO {{p}}big_text SELECT 1, REPEAT('x', {BIG_TEXT_CHARS}) UNION ALL SELECT 2, 'short'",
    'CREATE TABLE {p}"Orders" (id INTEGER, "Status" VARCHAR)',
    "INSERT INTO {p}\"Orders\" VALUES (2, 'upper-shipped')",
    'CREATE TABLE {p}"dotted.name" (id INTEGER, "col.with.dot" VARCHAR)',
    "INSERT INTO {p}\"dotted.name\" VALUES (1, 'dot-value')",
    *[f"CREATE TABLE {{p}}events_2024010{i} (id INTEGER, kind VARCHAR)" for i in range(1, 4)],
    *[f"INSERT INTO {{p}}events_2024010{i} VALUES ({i}, 'click')" for i in range(1, 4)],
    "CREATE VIEW {p}clicks AS SELECT id, kind FROM {p}events_20240101",
]


@contextlib.contextmanager
def make_snowflake() -> Iterator[str]:
    """A fresh database on the fakesnow server (the real connector over HTTP on loopback)."""
    yield fakesnow_database(
        "HOSTILE_", "H", lambda prefix: [statement.format(p=prefix) for statement in _SNOWFLAKE]
    )


@contextlib.contextmanager
def hostile_url(engine: str, directory: Path) -> Iterator[str]:
    with url_from(engine, directory, sys.modules[__name__]) as url:
        yield url
