"""Hardening (issue 13), values and sizes: exact numbers stay exact in structured output, text and
comparisons; structured payloads have a byte cap; huge cells are cut while fetching; engines get
memory limits and PostgreSQL fetches with a server-side cursor."""

from __future__ import annotations

import decimal
import json
import uuid

import pytest
from engines import require_pg

from flexsql.config import LimitsConfig
from flexsql.tools.compare import CompareResults, compare_results
from flexsql.tools.engines import FetchLimits, SourceRegistry, open_source
from flexsql.tools.engines.fetch import collect
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.render import bounded_structured, cell_text, jsonable
from flexsql.tools.sql.equivalence import compare_tables

D = decimal.Decimal
BIG18 = "12345678901234567"
BIG38 = "9" * 38
FRAC38 = "1234567890123456789.1234567890123456789"


@pytest.fixture
def duck_ctx():
    src = open_source("duckdb://:memory:", name="mem")
    yield ToolContext(sources=SourceRegistry([src]))
    src.close()


# -- exact numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "structured", "text"),
    [
        (D(BIG18), int(BIG18), BIG18),
        (D(BIG38), int(BIG38), BIG38),
        (D(FRAC38), FRAC38, FRAC38),
        (D("9007199254740993"), 9007199254740993, "9007199254740993"),
        (D("-0.000000000000000001"), "-1E-18", "-1E-18"),
        (D("12.50"), "12.50", "12.50"),
        (D("100"), 100, "100"),
        (1e-20, 1e-20, "1e-20"),
        (0.1 + 0.2, 0.1 + 0.2, "0.3"),
    ],
)
def test_exact_values_stay_exact(value, structured, text):
    got = jsonable(value)
    assert got == structured and type(got) is type(structured)
    assert json.loads(json.dumps(got)) == structured
    assert cell_text(value) == text


def test_duckdb_decimals_reach_the_agent_exactly(duck_ctx):
    out = run_query(
        duck_ctx,
        RunQuery(
            sql=f"SELECT {BIG18}::DECIMAL(18,0) AS a, {BIG38}::DECIMAL(38,0) AS b, '{FRAC38}'::DECIMAL(38,19) AS c"
        ),
    )
    assert out.rows == [[int(BIG18), int(BIG38), FRAC38]]
    structured = json.loads(out.model_dump_json())
    assert structured["rows"] == [[int(BIG18), int(BIG38), FRAC38]]
    text = out.to_text()
    assert BIG18 in text and BIG38 in text and FRAC38 in text


def test_postgres_sum_of_bigints_is_exact():
    src = open_source(require_pg(), name="pg")
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        out = run_query(ctx, RunQuery(sql="SELECT sum(x) AS s FROM (VALUES (9007199254740993::bigint)) t(x)"))
        assert out.rows == [[9007199254740993]]
        assert "9007199254740993" in out.to_text()
    finally:
        src.close()


# -- comparisons: exact values exactly, tolerance for floats only -------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (2**53 + 1, 2**53, False),
        (D("12345678901234567"), D("12345678901234568"), False),
        (D(BIG38), D(BIG38) - 1, False),
        (D("0.1234567890123456789"), D("0.1234567890123456788"), False),
        (D(BIG38), int(BIG38), True),
        (D("2.50"), D("2.5"), True),
        (D("5.00"), 5, True),
        (0.1 + 0.2, 0.3, True),  # floats are inexact: within the tolerance
        (100.001, 100, True),
        (D("0.3333"), 1 / 3, True),  # an exact value against an inexact one: tolerance
        (100.5, 100, False),
    ],
)
def test_compare_tables_is_exact_for_exact_values(a, b, equal):
    verdict = compare_tables(["x"], [(a,)], ["x"], [(b,)])
    assert verdict.equivalent is equal, verdict.reason


def test_compare_results_tells_adjacent_big_integers_apart(duck_ctx):
    r1 = run_query(duck_ctx, RunQuery(sql="SELECT 9007199254740993::BIGINT AS n")).result_id
    r2 = run_query(duck_ctx, RunQuery(sql="SELECT 9007199254740992::BIGINT AS n")).result_id
    r3 = run_query(duck_ctx, RunQuery(sql="SELECT 9007199254740993::HUGEINT AS n")).result_id
    verdict = compare_results(duck_ctx, CompareResults(result_ids=[r1, r2, r3]))
    assert not verdict.equivalent
    assert sorted(map(sorted, verdict.groups)) == [sorted([r1, r3]), [r2]]


# -- structured payload cap ---------------------------------------------------------------------------


def test_structured_cap_setting_defaults_to_one_mebibyte():
    assert LimitsConfig().structured_kb == 1024


def test_bounded_structured_cuts_long_cells_and_rows_and_says_so(duck_ctx):
    out = run_query(
        duck_ctx, RunQuery(sql="SELECT i, repeat('x', 200000) AS big FROM range(40) t(i)", max_rows=40)
    )
    data = out.model_dump()
    assert len(json.dumps(data)) > 1024 * 1024
    bounded, cut = bounded_structured(data, 1024 * 1024)
    assert cut and bounded["truncated"] is True
    assert len(json.dumps(bounded)) <= 1024 * 1024
    assert bounded["rows"] and bounded["rows"][0][0] == 0  # the first rows stay, in order
    assert bounded["result_id"] == out.result_id  # a handle to fetch the rest

    small = run_query(duck_ctx, RunQuery(sql="SELECT 1 AS a")).model_dump()
    same, cut = bounded_structured(small, 1024 * 1024)
    assert same == small and not cut


def test_bounded_structured_holds_for_a_two_megabyte_cell_under_a_small_cap(duck_ctx):
    data = run_query(duck_ctx, RunQuery(sql="SELECT repeat('x', 2000000) AS s")).model_dump()
    for cap in (1024 * 1024, 64 * 1024, 4096):
        bounded, cut = bounded_structured(data, cap)
        assert cut and len(json.dumps(bounded)) <= cap


# -- huge cells are cut while fetching ----------------------------------------------------------------


def test_fetch_loop_cuts_huge_cells_and_keeps_the_row():
    rows, counted, more, reason = collect(
        iter([[(1, "x" * 5_000_000, b"\0" * 3_000_000)]]),
        FetchLimits(max_rows=10, max_bytes=2_000_000, max_cell_bytes=100_000),
    )
    assert counted == 1 and len(rows) == 1
    assert len(rows[0][1]) <= 100_000 and len(rows[0][2]) <= 100_000
    assert reason is not None and reason.cells == 2 and reason.rows is None  # both cells cut, no row dropped


def test_sqlite_zeroblob_is_cut_or_refused_without_materialising(tmp_path):
    import sqlite3

    path = tmp_path / "z.sqlite"
    sqlite3.connect(path).close()
    src = open_source(f"sqlite:///{path}")
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        from flexsql.errors import FlexSQLError

        try:
            out = run_query(ctx, RunQuery(sql="SELECT zeroblob(500000000) AS z"))
        except FlexSQLError as exc:
            assert "too big" in str(exc) or "cell" in str(exc)
        else:
            assert out.row_count == 1 and "rows 1-0" not in out.to_text()
    finally:
        src.close()


def test_a_huge_duckdb_cell_is_cut_not_reported_as_zero_rows(duck_ctx):
    out = run_query(duck_ctx, RunQuery(sql="SELECT repeat('y', 20000000) AS s"))
    assert out.row_count == 1 and out.total_rows == 1
    assert "rows 1-0" not in out.to_text()
    assert len(out.rows[0][0]) < 20_000_000


# -- engine memory ------------------------------------------------------------------------------------


def test_duckdb_gets_memory_and_temp_limits_from_limits():
    assert LimitsConfig().engine_memory_mb == 2048
    src = open_source("duckdb://:memory:")
    try:
        rows = src.execute(
            "SELECT current_setting('memory_limit'), current_setting('max_temp_directory_size')"
        ).rows
        memory, temp = rows[0]
        assert memory.replace(" ", "").upper() in ("2.0GIB", "1.9GIB", "2048.0MIB", "2.0GB", "1.9GB")
        assert temp not in ("", None)
    finally:
        src.close()


def test_postgres_fetches_through_a_server_side_cursor():
    """With max_rows=20, the server keeps the rest: the backend shows a named cursor while we fetch."""
    src = open_source(require_pg(), name="pg")
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        ctx.limits.store_rows = 1000
        out = run_query(
            ctx,
            RunQuery(
                sql="SELECT g, (SELECT count(*) FROM pg_cursors WHERE name <> '') AS cursors "
                "FROM generate_series(1, 200000) g",
                max_rows=20,
            ),
        )
        assert out.rows[0][1] >= 1
        assert out.total_rows == 1001 and out.total_is_lower_bound
    finally:
        src.close()


def test_postgres_reconnects_after_its_backends_are_terminated():
    import psycopg

    dsn = require_pg()
    src = open_source(dsn, name="pg")
    marker = "flexsql_" + uuid.uuid4().hex[:8]
    try:
        ctx = ToolContext(sources=SourceRegistry([src]))
        assert run_query(ctx, RunQuery(sql=f"SELECT '{marker}' AS m")).rows == [[marker]]
        pids = [conn.info.backend_pid for conn in src._pool]  # only ours: other tests share the server
        assert pids
        with psycopg.connect(dsn, autocommit=True) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert run_query(ctx, RunQuery(sql="SELECT 2 AS n")).rows == [[2]]
    finally:
        src.close()
