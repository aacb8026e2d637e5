"""Every tool at once (tools/toolbox.py's TOOLS), per engine.

On every column of the hostile-data fixture (tests/support/hostile.py) each call must give an answer
(text and JSON-safe structured content) or a clear FlexSQLError — never an unexpected exception, which
the server would report as "internal error". The text a model reads is capped at limits.output_chars
for every tool, wide tables included (a 400-column table used to come back as ~29,000 characters of
describe_table / sample_rows text). Binary values render one way across tools: a BLOB shows as
`0x<hex>` in run_query, sample_rows, describe_table examples, distinct_values and profile_column alike
(value tools used to show DuckDB's `\\xAA\\xBB` text and SQLite's raw bytes)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flexsql.config import Settings
from flexsql.errors import FlexSQLError
from flexsql.tools.catalog import (
    DescribeTable,
    ListSchemas,
    ListSources,
    ListTables,
    describe_table,
    list_schemas,
    list_sources,
    list_tables,
)
from flexsql.tools.compare import CompareResults, compare_results
from flexsql.tools.engines import SourceRegistry, engine_for, open_source
from flexsql.tools.joins import FindJoinPath, find_join_path
from flexsql.tools.query import FetchRows, RunQuery, SampleRows, fetch_rows, run_query, sample_rows
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import result_text
from flexsql.tools.search.ranking import SearchSchema, search_schema
from flexsql.tools.toolbox import TOOLS
from flexsql.tools.validate import ValidateSql, validate_sql
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.find import FindValues, find_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.engines import engine_params, make_pg_database
from tests.support.hostile import hostile_url


@pytest.fixture(scope="module", params=engine_params())
def hostile(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ToolContext]:
    with hostile_url(request.param, tmp_path_factory.mktemp(request.param)) as url:
        src = open_source(url, name="hostile")
        ctx = ToolContext(sources=SourceRegistry([src]))
        yield ctx
        src.close()


class Outcome:
    """Collects every call that failed with something other than a FlexSQLError."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.clear_errors: list[str] = []

    def call(self, label: str, func: Callable[[], Any], must_answer: bool = False) -> Any:
        """`must_answer`: the data is valid and the request plain (read a column, profile it), so
        only an answer will do; otherwise a clear FlexSQLError is acceptable too."""
        try:
            out = func()
        except FlexSQLError as exc:
            text = str(exc)
            if must_answer or not text or "internal error" in text or "ambiguous" in text or len(text) < 15:
                self.failures.append(f"{label}: {type(exc).__name__}: {text[:200]!r}")
            self.clear_errors.append(f"{label}: {text[:160]}")
            return None
        except Exception as exc:
            self.failures.append(f"{label}: {type(exc).__name__}: {str(exc)[:200]}")
            return None
        try:
            text = out.to_text()
            json.dumps(out.model_dump(mode="json", by_alias=True))
        except Exception as exc:
            self.failures.append(f"{label}: rendering failed: {type(exc).__name__}: {str(exc)[:200]}")
            return None
        assert isinstance(text, str) and text
        return out


@pytest.mark.parametrize(
    "hostile",
    # Snowflake's turn moves the 10 MB value through the emulator's HTTP server: ~20 s
    [
        *engine_params("duckdb", "sqlite", "postgres"),
        pytest.param("snowflake", marks=pytest.mark.integration),
    ],
    indirect=True,
)
def test_every_tool_on_every_column(hostile: ToolContext) -> None:
    ctx = hostile
    src = ctx.source()
    outcome = Outcome()
    outcome.call("list_sources", lambda: list_sources(ctx, ListSources()))
    outcome.call("list_schemas", lambda: list_schemas(ctx, ListSchemas()))
    listing = outcome.call("list_tables", lambda: list_tables(ctx, ListTables(limit=1000)))
    assert listing is not None, outcome.failures
    outcome.call("search_schema", lambda: search_schema(ctx, SearchSchema(query="happy orders status")))
    catalog = src.catalog()
    base = [t for t in catalog.tables if t.kind == "table"]
    outcome.call(
        "find_join_path",
        lambda: find_join_path(ctx, FindJoinPath(tables=[base[0].qualified, base[1].qualified])),
    )
    # every entry list_tables prints is addressable, families included
    for entry in listing.tables:
        outcome.call(
            f"describe_table {entry.name}",
            lambda e=entry: describe_table(ctx, DescribeTable(table=e.name)),
            must_answer=True,
        )
    result_ids = []
    validated = False
    for table in catalog.tables:
        name = table.qualified
        if table.kind == "view":
            outcome.call(f"sample_rows {name}", lambda n=name: sample_rows(ctx, SampleRows(table=n)))
            continue
        outcome.call(
            f"describe_table {name}",
            lambda n=name: describe_table(ctx, DescribeTable(table=n)),
            must_answer=True,
        )
        sample = outcome.call(
            f"sample_rows {name}",
            lambda n=name: sample_rows(ctx, SampleRows(table=n, limit=3)),
            must_answer=True,
        )
        for col in table.columns:
            label = f"{name}.{col.name} ({col.type})"
            outcome.call(
                f"profile_column {label}",
                lambda n=name, c=col.name: profile_column(ctx, ProfileColumn(table=n, column=c)),
                must_answer=True,
            )
            outcome.call(
                f"distinct_values {label}",
                lambda n=name, c=col.name: distinct_values(ctx, DistinctValues(table=n, column=c)),
                must_answer=True,
            )
            outcome.call(
                f"sample_rows {label}",
                lambda n=name, c=col.name: sample_rows(ctx, SampleRows(table=n, columns=[c])),
                must_answer=True,
            )
            sql = f"SELECT {engine_for(src.dialect).quote(col.name)} FROM {engine_for(src.dialect).quote_table(table)}"
            out = outcome.call(
                f"run_query {label}", lambda s=sql: run_query(ctx, RunQuery(sql=s)), must_answer=True
            )
            if out is not None:
                result_ids.append(out.result_id)
                outcome.call(
                    f"fetch_rows {label}",
                    lambda r=out.result_id: fetch_rows(ctx, FetchRows(result_id=r, limit=2)),
                )
            if src.dialect != "snowflake" or not validated:
                # fakesnow has no EXPLAIN (its server answers 500, retried to the timeout): once there
                outcome.call(f"validate_sql {label}", lambda s=sql: validate_sql(ctx, ValidateSql(sql=s)))
                validated = True
        if sample is not None:
            for value in {str(v)[:100] for row in sample.rows for v in row if v not in (None, "")}:
                outcome.call(
                    f"find_values {value!r} in {name}",
                    lambda v=value, n=name: find_values(ctx, FindValues(text=v, tables=[n])),
                )
    outcome.call("find_values everywhere", lambda: find_values(ctx, FindValues(text="happy")))
    if len(result_ids) >= 2:
        outcome.call(
            "compare_results", lambda: compare_results(ctx, CompareResults(result_ids=result_ids[:2]))
        )
    assert not outcome.failures, "\n".join(outcome.failures)


@pytest.mark.parametrize(
    "hostile", ["sqlite"], indirect=True
)  # only SQLite keeps a view whose table was dropped
def test_dangling_view_is_reported_not_fatal(hostile: ToolContext) -> None:
    listing = list_tables(hostile, ListTables(limit=1000))
    names = [t.name.split(".", 1)[-1] for t in listing.tables]
    assert "every_type" in names and "dangling" in names
    text = describe_table(hostile, DescribeTable(table="dangling")).to_text()
    assert "broken" in text and "gone" in text


def test_families_and_dotted_names_are_addressable(hostile: ToolContext, tmp_path: Path) -> None:
    listing = list_tables(hostile, ListTables(limit=1000))
    family = next(t for t in listing.tables if t.kind == "family")
    described = describe_table(hostile, DescribeTable(table=family.name))
    assert described.table.lower().endswith("events_*") and described.kind == "family"
    assert described.family and "3 tables" in described.family
    dotted = describe_table(hostile, DescribeTable(table='"dotted.name"'))
    assert dotted.table.endswith("dotted.name")
    assert [c.name.lower() for c in dotted.columns] == ["id", "col.with.dot"]
    assert dotted.columns[1].name == "col.with.dot"  # quoted: kept exactly
    assert "dot-value" in dotted.columns[1].examples
    assert sample_rows(hostile, SampleRows(table="dotted.name")).rows == [[1, "dot-value"]]


@pytest.mark.parametrize("hostile", ["snowflake"], indirect=True)
def test_snowflake_values_reach_the_agent_exactly(hostile: ToolContext) -> None:
    """Through the real connector (fakesnow): big integers and NUMBER(38,19) stay exact, BINARY shows
    as hex like every other engine's BLOBs (the connector's bytearray printed as `bytearray(b'…')`),
    the text 'NULL' is not NULL, NaN/±inf are named."""
    out = run_query(
        hostile, RunQuery(sql="SELECT id, big, small_dec, f, txt, bl, ts FROM every_type ORDER BY id")
    )
    rows = json.loads(json.dumps(out.model_dump(mode="json")["rows"]))
    assert [r[1] for r in rows] == [9223372036854775807, -9223372036854775807, 9007199254740993]
    assert rows[1][2] == "-1234567890123456789.1234567890123456789"
    assert [r[3] for r in rows] == ["nan", "inf", "-inf"]
    assert [r[4] for r in rows] == ["NULL", None, ""]
    assert [r[5] for r in rows] == ["0x00ff", None, "0x"]
    assert rows[1][6].startswith("9999-12-31T23:59:59.999999")
    text = out.to_text()
    assert "0x00ff" in text and "bytearray" not in text and "'NULL'" in text
    assert "-1234567890123456789.1234567890123456789" in text and "9007199254740993" in text
    described = describe_table(hostile, DescribeTable(table="every_type")).to_text()
    assert "0x00ff" in described and "bytearray" not in described
    assert [c.name for c in describe_table(hostile, DescribeTable(table='"Orders"')).columns] == [
        "ID",
        "Status",
    ]


@pytest.fixture
def wide(tmp_path: Path):  # type: ignore[no-untyped-def]
    import duckdb

    path = tmp_path / "wide.duckdb"
    con = duckdb.connect(str(path))
    cols = ", ".join(f"measurement_column_number_{i} VARCHAR" for i in range(400))
    con.execute(f"CREATE TABLE wide ({cols})")
    con.execute(
        f"INSERT INTO wide SELECT {', '.join(repr(f'value {i} ' * 3) for i in range(400))} FROM range(30)"
    )
    con.close()
    source = open_source(f"duckdb:///{path}", name="wide")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("describe_table", {"table": "wide"}),
        ("sample_rows", {"table": "wide", "limit": 30}),
        ("run_query", {"sql": "SELECT * FROM wide", "max_rows": 30}),
        ("search_schema", {"query": "measurement column number", "limit": 100}),
    ],
)
def test_text_stays_under_the_cap(wide: ToolContext, tool: str, arguments: dict) -> None:
    for cap in (4000, 1500):
        settings = Settings(limits={"output_chars": cap})
        text = result_text(TOOLS.call(wide, tool, arguments), settings)
        assert len(text) <= cap, (tool, cap, len(text))
        assert text.strip()


BLOB = bytes([0xAA, 0xBB, 0x01])


SHOWN = "0xaabb01"


@pytest.fixture(params=engine_params("duckdb", "sqlite", "postgres"))
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ToolContext]:
    with contextlib.ExitStack() as stack:
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
            import psycopg

            # a database of its own: the schema name `blobs` is fixed, and the server is shared
            url = stack.enter_context(make_pg_database())
            with psycopg.connect(url, autocommit=True) as con:
                con.execute("CREATE SCHEMA blobs")
                con.execute("CREATE TABLE blobs.files (id INTEGER, data BYTEA)")
                con.execute("INSERT INTO blobs.files VALUES (1, %s), (2, %s)", [BLOB, BLOB])
                con.execute("ANALYZE blobs.files")
        source = stack.enter_context(contextlib.closing(open_source(url, name="b")))
        yield ToolContext(sources=SourceRegistry([source]))


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
