"""What a value tool reads (tools/values/scope.py): bad limits, text and names are clear errors, and
user text never writes, on every engine."""

from __future__ import annotations

import pytest

from flexsql.errors import InvalidArgument, NotFoundError
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.toolbox import TOOLS
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.find import FindValues, find_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.engines import content_checksum


@pytest.mark.parametrize("engine", ["duckdb"])
@pytest.mark.parametrize("bad", [0, 101, -3, 2.5, "many"])
def test_bad_limits_are_clear_errors(ctx: ToolContext, bad) -> None:
    for name, arguments in (
        ("find_values", {"text": "France", "limit": bad}),
        ("distinct_values", {"table": "customers", "column": "country", "limit": bad}),
    ):
        with pytest.raises(InvalidArgument, match="limit"):
            TOOLS.call(ctx, name, arguments)


@pytest.mark.parametrize("engine", ["duckdb"])
def test_bad_text_and_names_are_clear_errors(ctx: ToolContext) -> None:
    with pytest.raises(InvalidArgument, match="text is required"):
        find_values(ctx, FindValues(text="  "))
    with pytest.raises(InvalidArgument, match="text takes at most 200 characters"):
        TOOLS.call(ctx, "find_values", {"text": "x" * 500})
    with pytest.raises(NotFoundError, match="did you mean: country"):
        distinct_values(ctx, DistinctValues(table="customers", column="countyr"))
    with pytest.raises(NotFoundError, match="did you mean"):
        profile_column(ctx, ProfileColumn(table="custommers", column="country"))
    with pytest.raises(InvalidArgument, match="column is required"):
        profile_column(ctx, ProfileColumn(table="customers", column=""))


def test_user_text_never_writes(ctx: ToolContext, shop_url: str, engine: str) -> None:
    before = content_checksum(engine, shop_url)
    payloads = ["'; DROP TABLE customers; --", "x'); DELETE FROM orders; --", '" OR 1=1 --', "%' OR '1'='1"]
    for payload in payloads:
        assert (
            distinct_values(ctx, DistinctValues(table="customers", column="name", contains=payload)).values
            == []
        )
        find_values(
            ctx, FindValues(text=payload, tables=["customers", "orders"])
        )  # explicit tables: live checks run too
        with pytest.raises(NotFoundError):
            distinct_values(ctx, DistinctValues(table="customers", column=payload))
        with pytest.raises(NotFoundError):
            profile_column(ctx, ProfileColumn(table=f"customers; {payload}", column="name"))
    ctx.source().close()
    assert content_checksum(engine, shop_url) == before
