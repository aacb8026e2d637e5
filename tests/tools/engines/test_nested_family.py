"""A family's nested keys are the union over its shards, found where values are, and search_schema ranks
every one of them as a column from its first call (issue 27, items 2 and 3): on every engine, through a
real MCP client, over a family whose first shard holds only empty arrays."""

from __future__ import annotations

import re

import pytest

from tests.support.mcp_support import tool_caller
from tests.support.nested_family import FIRST_ROWS, LAST_KEY, nested_family_url

pytestmark = pytest.mark.anyio


def _paths(text: str) -> set[str]:
    """The nested paths a describe_table text lists, lower-cased (Snowflake folds column names up)."""
    return {m.group(1).lower() for m in re.finditer(r"^  - (\S+) [A-Z]+", text, re.MULTILINE)}


@pytest.fixture
def events_url(engine, tmp_path):
    with nested_family_url(engine, tmp_path) as url:
        yield url


async def test_a_familys_paths_are_those_of_every_shard(events_url):
    async with tool_caller(events_url) as call:
        family = await call("describe_table", table="events_*")
        paths = _paths(family)
        # in shards 2 and 3 only; shard 1's first 60 rows hold [] and {}
        for key in ("items[].item_name", "items[].quantity", "items[].price", "items[].item_brand"):
            assert key in paths, family
        assert {"ecommerce.transaction_id", "ecommerce.purchase_revenue"} <= paths, family
        assert "e.g. 'navy tee'" in family.lower() or "e.g. 'cap'" in family.lower(), family
        assert "paths from values of 4 of 4 tables" in family
        # a shard whose own rows hold nothing shows the paths of its column set: a warehouse's schema does
        # not depend on which rows a sample hit
        first = await call("describe_table", table="events_20240101")
        assert {"items[].item_name", "items[].quantity", "ecommerce.transaction_id"} <= _paths(first), first
        # and what it lists reads: the value tools take the path as a column
        names = await call("distinct_values", table="events_*", column="items[].item_name")
        assert {"Navy Tee", "Cap", "Mug"} <= set(re.findall(r"^(\w[\w ]*\w) \| \d", names, re.MULTILINE)), (
            names
        )


async def test_search_schema_ranks_nested_keys_without_describe_table(events_url, engine):
    """The question names keys inside an array of objects: search ranks the paths like any column,
    before any describe_table ran, including the key that sorts last among sixty."""
    async with tool_caller(events_url) as call:
        found = await call(
            "search_schema", query="name and quantity of the items bought in each purchase", limit=5
        )
        columns = [line.split(" ", 2)[1].lower() for line in found.splitlines() if line.startswith("- ")]
        assert any(c.endswith("items[].item_name") for c in columns[:4]), found
        assert any(c.endswith("items[].quantity") for c in columns[:4]), found
        wide = await call("search_schema", query="shipping tier of an event", limit=5)
        assert f"payload.{LAST_KEY}" in wide.lower(), wide
        # a text column holding JSON: local engines probe text columns' first rows; on a warehouse (where
        # reading costs and nested columns are typed) describe_table finds it, and search follows
        if engine == "snowflake":
            assert "body.region" in (await call("describe_table", table="tally_*")).lower()
        tally = await call("search_schema", query="units by region", limit=5)
        assert "body.region" in tally.lower() and "body.units" in tally.lower(), tally


def test_the_fixture_first_shard_is_longer_than_a_first_rows_sample():
    assert FIRST_ROWS > 50  # the old describe_table read the family's first 50 rows


async def test_text_columns_past_the_probe_cap_leave_the_rest_described(tmp_path, monkeypatch):
    """A table wider than the text columns probed for JSON: those probed give their paths, the others
    are plain columns (was: a KeyError that failed describe_table and the first search)."""
    import duckdb

    from flexsql.tools.engines import nested_sample

    monkeypatch.setattr(nested_sample, "PROBE_MAX_COLUMNS", 2)
    path = tmp_path / "wide.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE wide (a VARCHAR, b VARCHAR, c VARCHAR, d VARCHAR)")
    conn.execute("""INSERT INTO wide VALUES ('{"k": 1}', 'x', '{"late": 2}', 'y')""")
    conn.close()
    async with tool_caller(f"duckdb:///{path}") as call:
        described = await call("describe_table", table="wide")
        assert "  - a.k BIGINT" in described and "- d VARCHAR e.g. y" in described, described
        assert "wide" in await call("search_schema", query="k of a")
