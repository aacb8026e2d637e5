"""Far dates stay dates on every engine: 9999-12-31 (the usual "still valid" sentinel of history
tables), 9999-12-31 23:59:59.999999 and 0001-01-01 are what Python's date.max / datetime.max /
date.min hold — and what DuckDB's driver also hands over for ±infinity. The engine tells them apart
(tools/engines/duckdb_source.py) so that a real far date shows, is stored and compares as a date,
and a real infinity as 'infinity', on DuckDB, SQLite, PostgreSQL and Snowflake (fakesnow)."""

from __future__ import annotations

import datetime as dt

import pytest

from flexsql.tools.compare import CompareResults, compare_results
from flexsql.tools.engines import SourceRegistry
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.sql.equivalence import compare_tables

FAR = {
    "duckdb": "SELECT DATE '9999-12-31' AS valid_to, TIMESTAMP '9999-12-31 23:59:59.999999' AS ts_to, "
    "DATE '0001-01-01' AS valid_from, TIMESTAMP '0001-01-01 00:00:00' AS ts_from",
    "postgres": "SELECT DATE '9999-12-31' AS valid_to, TIMESTAMP '9999-12-31 23:59:59.999999' AS ts_to, "
    "DATE '0001-01-01' AS valid_from, TIMESTAMP '0001-01-01 00:00:00' AS ts_from",
    "snowflake": "SELECT DATE '9999-12-31' AS valid_to, '9999-12-31 23:59:59.999999'::TIMESTAMP_NTZ AS ts_to, "
    "DATE '0001-01-01' AS valid_from, '0001-01-01 00:00:00'::TIMESTAMP_NTZ AS ts_from",
    # SQLite keeps dates as text: they were never at risk, and stay so
    "sqlite": "SELECT date('9999-12-31') AS valid_to, '9999-12-31 23:59:59.999999' AS ts_to, "
    "date('0001-01-01') AS valid_from, '0001-01-01 00:00:00' AS ts_from",
}
TEXT = ["9999-12-31", "9999-12-31 23:59:59.999999", "0001-01-01", "0001-01-01 00:00:00"]
INFINITE = {
    "duckdb": "SELECT 'infinity'::DATE AS valid_to, 'infinity'::TIMESTAMP AS ts_to, "
    "'-infinity'::DATE AS valid_from, '-infinity'::TIMESTAMP AS ts_from",
    "postgres": "SELECT 'infinity'::DATE AS valid_to, 'infinity'::TIMESTAMP AS ts_to, "
    "'-infinity'::DATE AS valid_from, '-infinity'::TIMESTAMP AS ts_from",
}


def test_far_dates_stay_dates(shop, engine):
    ctx = ToolContext(sources=SourceRegistry([shop]))
    out = run_query(ctx, RunQuery(sql=FAR[engine]))
    body = out.to_text().splitlines()[2]
    assert body.replace("T", " ").split(" | ") == TEXT, out.to_text()
    assert "infinity" not in out.to_text()
    assert out.rows[0][0] == "9999-12-31" and out.rows[0][2] == "0001-01-01"
    assert out.rows[0][1].replace("T", " ") == TEXT[1] and out.rows[0][3].replace("T", " ") == TEXT[3]
    stored = ctx.results.get(out.result_id).rows[0]
    if engine != "sqlite":
        assert stored[0] == dt.date(9999, 12, 31) and stored[2] == dt.date(1, 1, 1)
        assert stored[1] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)


@pytest.mark.parametrize(
    "engine", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_infinity_stays_infinity_and_is_not_a_far_date(shop, engine):
    ctx = ToolContext(sources=SourceRegistry([shop]))
    far = run_query(ctx, RunQuery(sql=FAR[engine]))
    infinite = run_query(ctx, RunQuery(sql=INFINITE[engine]))
    assert infinite.to_text().splitlines()[2].split(" | ") == [
        "infinity",
        "infinity",
        "-infinity",
        "-infinity",
    ]
    verdict = compare_results(ctx, CompareResults(result_ids=[far.result_id, infinite.result_id]))
    assert verdict.equivalent is False, verdict.to_text()
    a, b = ctx.results.get(far.result_id), ctx.results.get(infinite.result_id)
    assert not compare_tables(a.columns, a.rows, b.columns, b.rows).equivalent
    # and a far date equals itself read again (a history table's sentinel filter)
    again = run_query(ctx, RunQuery(sql=FAR[engine]))
    assert compare_results(ctx, CompareResults(result_ids=[far.result_id, again.result_id])).equivalent


@pytest.mark.parametrize("engine", ["duckdb"], indirect=True)
def test_duckdb_far_dates_in_every_time_type(shop, engine):
    """TIMESTAMPTZ, TIMESTAMP_S/_MS, dates in a history table with several rows, duplicate names."""
    ctx = ToolContext(sources=SourceRegistry([shop]))
    out = run_query(
        ctx,
        RunQuery(
            sql="SELECT * FROM (VALUES (1, DATE '2024-01-01', DATE '9999-12-31'), "
            "(2, DATE '2020-01-01', 'infinity'::DATE), (3, '-infinity'::DATE, DATE '0001-01-01')) "
            "AS h(id, valid_from, valid_to) ORDER BY id"
        ),
    )
    stored = ctx.results.get(out.result_id).rows
    assert stored == [
        (1, dt.date(2024, 1, 1), dt.date(9999, 12, 31)),
        (2, dt.date(2020, 1, 1), "infinity"),
        (3, "-infinity", dt.date(1, 1, 1)),
    ]
    tz = run_query(
        ctx,
        RunQuery(
            sql="SELECT TIMESTAMPTZ '9999-12-31 23:59:59.999999+00' AS t, 'infinity'::TIMESTAMPTZ AS t, "
            "'infinity'::TIMESTAMP_S AS s, TIMESTAMP_MS '9999-12-31 23:59:59.999' AS ms"
        ),
    )
    row = ctx.results.get(tz.result_id).rows[0]
    assert isinstance(row[0], dt.datetime) and row[0].year == 9999
    assert row[1] == "infinity" and row[2] == "infinity"
    assert isinstance(row[3], dt.datetime) and row[3].microsecond == 999000
