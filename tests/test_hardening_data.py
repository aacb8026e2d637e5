"""Regressions of issue 13 (stale answers, names, hostile values, clear errors) and issue 12 item 5
(a DuckDB file named like one of its schemas), on real DuckDB/SQLite files and real PostgreSQL."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from engines import require_pg

from flexsql.errors import ConfigError, FlexSQLError, NotFoundError
from flexsql.tools.catalog import DescribeTable, ListTables, describe_table, list_tables
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.query import RunQuery, SampleRows, run_query, sample_rows
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.render import cell_text
from flexsql.tools.validate import ValidateSql, validate_sql
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.find import FindValues, find_values
from flexsql.tools.values.profile import ProfileColumn, profile_column


def context(url: str) -> ToolContext:
    return ToolContext(sources=SourceRegistry([open_source(url, name="db")]))


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


# -- 1. find_values must not serve deleted values -----------------------------------------------------


def _cities_duckdb(path: Path) -> None:
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE cities (name VARCHAR)")
    conn.execute("INSERT INTO cities VALUES ('Lyon'), ('Paris'), ('Nantes')")
    conn.close()


def test_find_values_forgets_deleted_values_duckdb(tmp_path: Path) -> None:
    path = tmp_path / "cities.duckdb"
    _cities_duckdb(path)
    ctx = context(f"duckdb:///{path}")
    first = find_values(ctx, FindValues(text="Nantes"))
    assert [m.value for m in first.matches] == ["Nantes"]
    assert "value index built" in first.to_text()
    ctx.source().close()  # let go of the file so another program can write it
    conn = duckdb.connect(str(path))
    conn.execute("DELETE FROM cities WHERE name = 'Nantes'")
    conn.execute("INSERT INTO cities VALUES ('Rennes')")
    conn.close()
    again = find_values(ctx, FindValues(text="Nantes"))
    assert not [m for m in again.matches if m.value == "Nantes"], again.to_text()
    assert [m.value for m in find_values(ctx, FindValues(text="Rennes")).matches] == ["Rennes"]


def test_find_values_forgets_deleted_values_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "cities.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE cities (name TEXT)")
    conn.execute("INSERT INTO cities VALUES ('Lyon'), ('Paris'), ('Nantes')")
    conn.commit()
    ctx = context(f"sqlite:///{path}")
    assert [m.value for m in find_values(ctx, FindValues(text="Nantes")).matches] == ["Nantes"]
    conn.execute("UPDATE cities SET name = 'Rennes' WHERE name = 'Nantes'")
    conn.commit()
    conn.close()
    again = find_values(ctx, FindValues(text="Nantes"))
    assert not [m for m in again.matches if m.value == "Nantes"], again.to_text()


def test_find_values_forgets_deleted_values_postgres() -> None:
    import psycopg

    with pg_schema(
        "CREATE TABLE cities (name text)", "INSERT INTO cities VALUES ('Lyon'), ('Paris'), ('Nantes')"
    ) as (url, dsn):
        ctx = context(url)
        assert [m.value for m in find_values(ctx, FindValues(text="Nantes")).matches] == ["Nantes"]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM cities WHERE name = 'Nantes'")
        # the writer's counters reach pg_stat_user_tables when its session ends (above), give it a moment
        deadline = time.monotonic() + 5
        while True:
            again = find_values(ctx, FindValues(text="Nantes"))
            gone = not [m for m in again.matches if m.value == "Nantes"]
            if gone or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        ctx.source().close()
        assert gone, again.to_text()


def test_find_values_rebuilds_entries_past_the_age_limit(tmp_path: Path) -> None:
    path = tmp_path / "cities.duckdb"
    _cities_duckdb(path)
    ctx = context(f"duckdb:///{path}")
    find_values(ctx, FindValues(text="Lyon"))
    ctx.limits = ctx.limits.model_copy(update={"value_index_ttl_s": 0.001})
    time.sleep(0.01)
    again = find_values(ctx, FindValues(text="Lyon"))
    assert (
        again.index_tables_built == 1
    )  # past [limits] value_index_ttl_s: rebuilt although the file is unchanged
    assert again.index_age_s is not None and again.index_age_s < 5
    ctx.limits = ctx.limits.model_copy(update={"value_index_ttl_s": 3600})
    assert find_values(ctx, FindValues(text="Lyon")).index_tables_built == 0  # within it: reused


# -- 2. describe_table examples after a refresh ---------------------------------------------------------


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


# -- 3. names: case, dots, families ---------------------------------------------------------------------


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


# -- 4. a DuckDB file named like one of its schemas (issue 12 item 5) ----------------------------------


def test_duckdb_file_named_like_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "sales.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE SCHEMA sales")
    conn.execute("CREATE TABLE sales.sales.orders (id INTEGER, city VARCHAR)")
    conn.execute("INSERT INTO sales.sales.orders VALUES (1, 'Lyon'), (2, 'Nantes')")
    conn.close()
    ctx = context(f"duckdb:///{path}")
    assert sample_rows(ctx, SampleRows(table="sales.orders")).rows == [[1, "Lyon"], [2, "Nantes"]]
    assert describe_table(ctx, DescribeTable(table="sales.orders")).columns[1].examples == ["Lyon", "Nantes"]
    found = find_values(ctx, FindValues(text="Nantes"))
    assert [(m.table, m.column) for m in found.matches] == [("sales.orders", "city")], found.to_text()
    assert profile_column(ctx, ProfileColumn(table="sales.orders", column="city")).distinct == 2
    assert distinct_values(ctx, DistinctValues(table="sales.orders", column="city")).distinct_total == 2


# -- 5. the text the model reads ---------------------------------------------------------------------


def test_cell_text_shows_values_as_they_are() -> None:
    assert cell_text(1e-20) == "1e-20"
    assert cell_text(123456789.123) == "123456789.123"
    assert cell_text("NULL") != cell_text(None)
    assert cell_text("") != cell_text(None) and cell_text("") != ""
    assert cell_text(float("inf")) == "Infinity" and cell_text(float("nan")) == "NaN"
    assert cell_text(dt.datetime.max) == "infinity" and cell_text(dt.date.min) == "-infinity"
    import struct

    real = struct.unpack("f", struct.pack("f", 0.1))[0]  # what a REAL 0.1 reads back as
    assert cell_text(real) == "0.1"


def test_duckdb_text_keeps_months_nanoseconds_and_infinity(tmp_path: Path) -> None:
    ctx = context("duckdb://:memory:")
    out = run_query(
        ctx,
        RunQuery(
            sql="SELECT INTERVAL 1 MONTH AS m, '2024-01-01 12:00:00.123456789'::TIMESTAMP_NS AS ns, "
            "'infinity'::TIMESTAMP AS inf, 0.1::REAL AS r, 1e-20::DOUBLE AS tiny, 'NULL' AS s, NULL AS n"
        ),
    )
    text = out.to_text()
    row = text.splitlines()[2]
    cells = [c.strip() for c in row.split("|")]
    assert cells[0] == "1 month", text
    assert cells[1] == "2024-01-01 12:00:00.123456789", text
    assert cells[2] == "infinity", text
    assert cells[3] == "0.1" and cells[4] == "1e-20", text
    assert cells[5] != cells[6], text


# -- 7. valid data that used to fail -------------------------------------------------------------------


def test_postgres_special_values_load() -> None:
    with pg_schema() as (url, _):
        ctx = context(url)
        try:
            out = run_query(
                ctx,
                RunQuery(
                    sql="SELECT 'NaN'::numeric AS nan, 'Infinity'::numeric AS inf, "
                    "'infinity'::timestamp AS ts, '-infinity'::date AS d, '24:00'::time AS t, "
                    "interval '1 mon' AS iv, 12.5::numeric AS exact"
                ),
            )
            json.dumps(out.model_dump(mode="json"))
            row = out.rows[0]
            assert (
                row[2] == "infinity" and row[3] == "-infinity" and row[4] == "24:00:00" and row[5] == "1 mon"
            )
            assert str(row[0]).lower() == "nan" and str(row[1]).lower() == "inf"
            text = out.to_text()
            assert "infinity" in text and "24:00:00" in text and "1 mon" in text
        finally:
            ctx.source().close()


def test_profile_and_find_values_on_postgres_special_types() -> None:
    with pg_schema(
        "CREATE TYPE mood AS ENUM ('sad', 'happy')",
        "CREATE TABLE t (m mood, j jsonb, a text[], iv interval, r int4range, p point, money_col money)",
        "INSERT INTO t VALUES ('happy', '{\"city\": \"Quimper\"}', '{Brest,Morlaix}', '1 mon', '[1,5)', "
        "'(1,2)', '3.50'), ('sad', '{}', '{}', '2 days', 'empty', '(0,0)', '1.00')",
    ) as (url, _):
        ctx = context(url)
        try:
            assert profile_column(ctx, ProfileColumn(table="t", column="iv")).distinct == 2
            for col in ("m", "j", "a", "r", "p", "money_col"):
                profile = profile_column(ctx, ProfileColumn(table="t", column=col))
                assert profile.rows == 2 and profile.nulls == 0, col
            assert [(m.column, m.value) for m in find_values(ctx, FindValues(text="happy")).matches] == [
                ("m", "happy")
            ]
            assert [m.column for m in find_values(ctx, FindValues(text="Quimper")).matches] == ["j"]
            assert [m.column for m in find_values(ctx, FindValues(text="Morlaix")).matches] == ["a"]
        finally:
            ctx.source().close()


def test_ten_megabyte_value(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (body TEXT, iv TEXT)")
    conn.execute("INSERT INTO t VALUES (printf('%.10000000c', 'x'), 'a'), ('short', 'b')")
    conn.commit()
    conn.close()
    ctx = context(f"sqlite:///{path}")
    dv = distinct_values(ctx, DistinctValues(table="t", column="body"))
    assert dv.distinct_total == 2 and len(dv.values) == 2
    assert max(len(str(v.value)) for v in dv.values) <= 1001
    profile = profile_column(ctx, ProfileColumn(table="t", column="body"))
    assert profile.rows == 2 and profile.distinct == 2 and profile.max_length == 10_000_000


# -- 9. CLI errors -----------------------------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEXSQL_CONFIG": ""}
    env.pop("FLEXSQL_CONFIG")
    return subprocess.run(
        [sys.executable, "-m", "flexsql.server", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def test_cli_sources_errors_are_clear(tmp_path: Path) -> None:
    duck = tmp_path / "file.duckdb"
    duckdb.connect(str(duck)).close()
    lite = tmp_path / "file.sqlite"
    sqlite3.connect(lite).execute("CREATE TABLE t (x)").connection.close()
    cases = [
        ("sources", "--db", f"sqlite:///{duck}"),
        ("sources", "--db", str(duck)),
        ("sources", "--db", ""),
        ("sources", "--db", f"duckdb:///{lite}"),
    ]
    for args in cases:
        proc = _cli(*args, cwd=tmp_path)
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
        assert proc.returncode != 0, (args, proc.stdout, proc.stderr)
    sqlite_as_duck = _cli("sources", "--db", f"duckdb:///{lite}", cwd=tmp_path)
    assert "sqlite:///" in sqlite_as_duck.stderr + sqlite_as_duck.stdout
    duck_as_sqlite = _cli("sources", "--db", f"sqlite:///{duck}", cwd=tmp_path)
    assert "duckdb:///" in duck_as_sqlite.stderr + duck_as_sqlite.stdout


def test_duckdb_errors_name_the_real_cause(tmp_path: Path) -> None:
    lite = tmp_path / "file.sqlite"
    sqlite3.connect(lite).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError, match="SQLite file.*sqlite:///"):
        open_source(f"duckdb:///{lite}").catalog()
    locked_dir = tmp_path / "version-2"  # a path holding "version" must not read as a version mismatch
    locked_dir.mkdir()
    path = locked_dir / "held.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "c.execute('CREATE TABLE t (x INT)'); print('ready', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(ConfigError) as info:
            open_source(f"duckdb:///{path}").catalog()
        assert "lock" in str(info.value) and "different DuckDB version" not in str(info.value)
    finally:
        holder.kill()
        holder.wait()


def test_duckdb_show_all_is_not_an_index_error() -> None:
    ctx = context("duckdb://:memory:")
    with pytest.raises(FlexSQLError) as info:
        run_query(ctx, RunQuery(sql="SHOW ALL"))
    assert "list index out of range" not in str(info.value) and "SHOW" in str(info.value)


def test_refused_is_not_doubled() -> None:
    ctx = context("duckdb://:memory:")
    with pytest.raises(FlexSQLError) as info:
        run_query(ctx, RunQuery(sql="DROP TABLE x"))
    assert "refused: refused" not in str(info.value).lower()


def test_misspelled_config_key_is_rejected(tmp_path: Path) -> None:
    from flexsql.config import load_settings

    config = tmp_path / "flexsql.toml"
    config.write_text("[limits]\nquery_timout_s = 5\n")
    with pytest.raises(ConfigError, match="query_timout_s"):
        load_settings(config)
    config.write_text("[[sources]]\nurl = 'duckdb://:memory:'\nnmae = 'x'\n")
    with pytest.raises(ConfigError, match="nmae"):
        load_settings(config)


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
