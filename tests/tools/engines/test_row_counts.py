"""Table sizes that are true (issue 27, item 1): small tables are counted on every engine, an estimate
says '≈' and where it came from, and no figure is a key's maximum (SQLite's max(rowid) said 83,814,225
rows for a 15-row table). Read through a real MCP client, as every client reads them."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engines import fakesnow_database, pg_schema
from tests.support.mcp_support import tool_caller

pytestmark = pytest.mark.anyio

# (table, rows): rowids far apart on SQLite, most rows deleted on DuckDB and PostgreSQL
SMALL = {"enrolment": 15, "pets": 3}


@contextlib.contextmanager
def sized_url(engine: str, directory: Path) -> Iterator[str]:
    if engine == "sqlite":
        path = directory / "sized.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE enrolment (id INTEGER PRIMARY KEY, course TEXT)")
        conn.executemany(
            "INSERT INTO enrolment VALUES (?, ?)", [(i * 5_587_615, f"c{i}") for i in range(1, 16)]
        )  # max(rowid) 83,814,225
        conn.execute("CREATE TABLE pets (pet_id INTEGER PRIMARY KEY, kind TEXT)")
        conn.executemany("INSERT INTO pets VALUES (?, ?)", [(1, "cat"), (2, "dog"), (2003, "fish")])
        conn.commit()
        conn.close()
        yield f"sqlite:///{path}"
        return
    statements = [
        "CREATE TABLE enrolment (id INTEGER, course VARCHAR(20))",
        "INSERT INTO enrolment SELECT i, 'c' FROM generate_series(1, 1500) AS g(i)"
        if engine == "postgres"
        else "INSERT INTO enrolment SELECT i, 'c' FROM range(1, 1501) AS g(i)",
        "CREATE TABLE pets (pet_id INTEGER, kind VARCHAR(20))",
        "INSERT INTO pets VALUES (1, 'cat'), (2, 'dog'), (2003, 'fish')",
    ]
    if engine == "postgres":  # statistics taken, then most rows deleted: reltuples says 1,500
        statements += ["ANALYZE enrolment", "DELETE FROM enrolment WHERE id > 15"]
    if engine == "duckdb":
        import duckdb

        path = directory / "sized.duckdb"
        conn = duckdb.connect(str(path))
        for s in statements:
            conn.execute(s)
        conn.execute("DELETE FROM enrolment WHERE id > 15")  # estimated_size still says 1,500
        conn.close()
        yield f"duckdb:///{path}"
    elif engine == "postgres":
        with pg_schema(*statements) as (url, _dsn):
            yield url
    elif engine == "snowflake":
        snow = [
            "CREATE TABLE {p}enrolment (id INTEGER, course VARCHAR)",
            "INSERT INTO {p}enrolment VALUES " + ", ".join(f"({i}, 'c')" for i in range(1, 16)),
            "CREATE TABLE {p}pets (pet_id INTEGER, kind VARCHAR)",
            "INSERT INTO {p}pets VALUES (1, 'cat'), (2, 'dog'), (2003, 'fish')",
        ]
        yield fakesnow_database("SZ_", "S", lambda prefix: [s.format(p=prefix) for s in snow])
    else:
        raise ValueError(engine)


@pytest.fixture
def sized(engine, tmp_path):
    with sized_url(engine, tmp_path) as url:
        yield url


def _rows_of(text: str, table: str) -> str:
    """The rows figure a line naming `table` shows ('15 rows', '≈1,500 rows')."""
    for line in text.splitlines():
        if re.search(rf"\b{table}\b", line, re.IGNORECASE):
            found = re.search(r"(≈?[\d,]+ rows?)", line)
            if found:
                return found.group(1)
    raise AssertionError(f"no rows figure for {table} in:\n{text}")


async def test_small_tables_are_counted_on_every_engine(sized):
    async with tool_caller(sized) as call:
        listed = await call("list_tables")
        for table, rows in SMALL.items():
            assert _rows_of(listed, table) == f"{rows} rows", listed
            described = await call("describe_table", table=table)
            assert described.splitlines()[0].endswith(f"(table, {rows} rows)"), described
        found = await call("search_schema", query="pets kind")
        assert _rows_of(found, "pets") == "3 rows", found
        assert "≈" not in listed + found  # every figure shown is a count


async def test_an_estimate_says_so_and_where_it_came_from(sized, engine, monkeypatch):
    """A table too big to count keeps the engine's estimate: marked '≈', its source named once."""
    from flexsql.tools.engines import row_counts

    monkeypatch.setattr(row_counts, "COUNT_UP_TO", -1)  # count nothing
    async with tool_caller(sized) as call:
        listed = await call("list_tables")
        if engine == "snowflake":  # its metadata holds exact counts: nothing is estimated
            assert _rows_of(listed, "pets") == "3 rows" and "≈" not in listed, listed
            return
        figure = _rows_of(listed, "enrolment")
        assert figure.startswith("≈"), listed
        if engine == "sqlite":  # the pages of 15 rows: within a factor of two, whatever the rowids say
            assert 8 <= int(figure[1:].split()[0].replace(",", "")) <= 30, listed
        note = next(line for line in listed.splitlines() if line.startswith("≈: an estimate"))
        source = {"sqlite": "pages", "duckdb": "DuckDB's table metadata", "postgres": "reltuples"}[engine]
        assert source in note, listed
        described = await call("describe_table", table="enrolment")
        assert "(table, ≈" in described.splitlines()[0] and "estimated from" in described.splitlines()[0]


def test_sqlite_page_estimates_are_within_a_factor_of_two(tmp_path):
    """Where SQLite is not counted (a big file, past the counting budget), the estimate comes from a
    sample of the table's B-tree pages: within a factor of two, and never a key's maximum."""
    from flexsql.tools.engines.sqlite_source import btree_estimates

    path = tmp_path / "big.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE wide (id INTEGER PRIMARY KEY, note TEXT)")
    conn.executemany("INSERT INTO wide VALUES (?, ?)", ((i * 1000, "x" * (i % 90)) for i in range(60_000)))
    conn.execute("CREATE TABLE tiny (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO tiny VALUES (999999999)")
    conn.commit()
    roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_master WHERE type = 'table'").fetchall())
    conn.close()
    estimates = btree_estimates(str(path), roots)
    assert 30_000 <= (estimates["wide"] or 0) <= 120_000, estimates
    assert estimates["tiny"] == 1
