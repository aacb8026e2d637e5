"""One rendering of binary values across tools: a BLOB shows as `0x<hex>` in run_query,
sample_rows, describe_table examples, distinct_values and profile_column alike (value tools used
to show DuckDB's `\\xAA\\xBB` text and SQLite's raw bytes)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from engines import pg_dsn

from flexsql.config import Settings
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import result_text
from flexsql.tools.toolbox import TOOLS

BLOB = bytes([0xAA, 0xBB, 0x01])
SHOWN = "0xaabb01"


@pytest.fixture(params=["duckdb", "sqlite", "postgres"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ToolContext]:
    if request.param == "duckdb":
        import duckdb

        path = tmp_path / "b.duckdb"
        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE files (id INTEGER, data BLOB)")
        con.execute("INSERT INTO files VALUES (1, ?), (2, ?)", [BLOB, BLOB])
        con.close()
        url = f"duckdb:///{path}"
    elif request.param == "sqlite":
        path = tmp_path / "b.sqlite"
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE files (id INTEGER, data BLOB)")
        con.executemany("INSERT INTO files VALUES (?, ?)", [(1, BLOB), (2, BLOB)])
        con.commit()
        con.close()
        url = f"sqlite:///{path}"
    else:
        dsn = pg_dsn()
        if not dsn:
            pytest.skip("FLEXSQL_TEST_PG_DSN is not set: PostgreSQL tests need a server")
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute("DROP SCHEMA IF EXISTS blobs CASCADE")
            con.execute("CREATE SCHEMA blobs")
            con.execute("CREATE TABLE blobs.files (id INTEGER, data BYTEA)")
            con.execute("INSERT INTO blobs.files VALUES (1, %s), (2, %s)", [BLOB, BLOB])
            con.execute("ANALYZE blobs.files")
        url = dsn
    source = open_source(url, name="b")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()
    if request.param == "postgres":
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute("DROP SCHEMA IF EXISTS blobs CASCADE")


def text(ctx: ToolContext, tool: str, **arguments: object) -> str:
    return result_text(TOOLS.call(ctx, tool, arguments), Settings())


def test_every_tool_shows_bytes_the_same_way(ctx: ToolContext) -> None:
    table = "blobs.files" if ctx.source().dialect == "postgres" else "files"
    shown = {
        "run_query": text(ctx, "run_query", sql=f"SELECT data FROM {table}"),
        "sample_rows": text(ctx, "sample_rows", table=table),
        "describe_table": text(ctx, "describe_table", table=table),
        "distinct_values": text(ctx, "distinct_values", table=table, column="data"),
        "profile_column": text(ctx, "profile_column", table=table, column="data"),
    }
    for tool, output in shown.items():
        assert SHOWN in output, f"{tool}:\n{output}"
        assert "\\xAA" not in output and "\\xaa" not in output, f"{tool}:\n{output}"
    distinct = TOOLS.call(ctx, "distinct_values", {"table": table, "column": "data"})
    assert [(v.value, v.count) for v in distinct.values] == [(SHOWN, 2)]  # type: ignore[attr-defined]
