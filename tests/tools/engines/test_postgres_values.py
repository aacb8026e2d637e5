"""PostgreSQL values Python's types cannot hold (tools/engines/postgres_values.py): NaN and infinite
numerics, infinite timestamps and dates, 24:00, intervals, and enums, jsonb, arrays, ranges, points
and money through profile_column and find_values. Real PostgreSQL."""

from __future__ import annotations

import json

import pytest

from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.values.find import FindValues, find_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.contexts import context
from tests.support.engines import pg_schema

pytestmark = pytest.mark.postgres


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
            # the value index holds the leaf by its path first, then the document that contains it
            assert [m.column for m in find_values(ctx, FindValues(text="Quimper")).matches] == ["j.city", "j"]
            assert [m.column for m in find_values(ctx, FindValues(text="Morlaix")).matches] == ["a"]
        finally:
            ctx.source().close()
