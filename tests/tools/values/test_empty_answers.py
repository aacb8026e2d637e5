"""Negative and empty answers that say what they rest on (issue 27, items 5 and 6), through a real MCP
client on every engine.

- find_values answered "no column holds a value like it" when the value index held only the most
  frequent (or sampled) values of some columns: it now says what was searched — how many text columns,
  how many with every value, which hold only part — and how to read one of those whole, and that advice
  finds the rare value.
- An empty query result was always "check filter literals against real values"; with the literals
  checked the data may simply hold no such rows, and the text lets that stand.
- search_schema's value hits through another word ('France' for 'French') rank below the question's own
  word stored as a value, and say they are approximate.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from flexsql.tools.values import find, index_scan
from tests.support.engines import ddl, fakesnow_database, pg_schema
from tests.support.mcp_support import tool_caller

pytestmark = pytest.mark.anyio


async def test_find_values_says_what_it_searched_and_how_to_read_the_rest(shop_url, engine, monkeypatch):
    # a warehouse in small: the index keeps each column's two most frequent values, nothing is read live
    monkeypatch.setattr(index_scan, "CAP_PER_COLUMN", 2)
    monkeypatch.setattr(find, "MAX_LIVE_COLUMNS", 0)
    async with tool_caller(shop_url) as call:
        missing = await call("find_values", text="united states")
        assert "no value like it among" in missing and "most frequent (or sampled) values only" in missing
        assert "no column holds" not in missing, missing
        advice = next(line for line in missing.splitlines() if "distinct_values(" in line)
        assert "customers.country" in advice.lower() or "customers.name" in advice.lower(), missing
        # the advice works: the partial column read whole finds the rare value
        table = "customers"
        column = "COUNTRY" if engine == "snowflake" else "country"
        found = await call("distinct_values", table=table, column=column, contains="united")
        assert "united states | 1" in found, found


async def test_a_checked_empty_result_stands(shop_url):
    async with tool_caller(shop_url) as call:
        empty = await call("run_query", sql="SELECT order_id FROM orders WHERE status = 'X'")
        hint = empty.splitlines()[-1]
        assert hint.startswith("no rows matched the filters"), empty
        assert "with the literals checked, no such rows exist and the empty result stands" in hint
        assert "check filter literals against real values" not in empty


LANGUAGES = [
    "CREATE TABLE {p}languages (country_code VARCHAR(8), language_name VARCHAR(20))",
    "INSERT INTO {p}languages VALUES ('FR', 'French'), ('DE', 'German')",
]


@contextlib.contextmanager
def shop_with_languages(engine: str, directory: Path) -> Iterator[str]:
    statements = ddl(engine) + [s.format(p="") for s in LANGUAGES]
    if engine == "duckdb":
        import duckdb

        conn = duckdb.connect(str(directory / "lang.duckdb"))
        for s in statements:
            conn.execute(s)
        conn.close()
        yield f"duckdb:///{directory / 'lang.duckdb'}"
    elif engine == "sqlite":
        lite = sqlite3.connect(directory / "lang.sqlite")
        for s in statements:
            lite.execute(s)
        lite.commit()
        lite.close()
        yield f"sqlite:///{directory / 'lang.sqlite'}"
    elif engine == "postgres":
        with pg_schema(*statements) as (url, _dsn):
            yield url
    else:
        yield fakesnow_database(
            "LG_", "SHOP", lambda p: ddl("snowflake", prefix=p) + [s.format(p=p) for s in LANGUAGES]
        )


async def test_value_hits_through_another_word_rank_below_the_word_itself(engine, tmp_path):
    """customers.country holds 'France'; a languages table holds 'French' itself: asked about French,
    the table holding the word ranks first, and the France hit is labelled approximate."""
    with shop_with_languages(engine, tmp_path) as url:
        async with tool_caller(url) as call:
            await call("find_values", text="French")  # builds the value index search reads
            found = await call("search_schema", query="customers who speak French", limit=5)
    lines = found.splitlines()
    tables = [line for line in lines if line[:1].isdigit()]
    first_language = next(i for i, line in enumerate(tables) if ".languages" in line.lower())
    approx = [i for i, line in enumerate(tables) if "approximate: for 'French'" in line]
    assert approx and "holds value 'French'" in tables[first_language], found
    assert all(first_language < i for i in approx), found
    columns = [line for line in lines if line.startswith("- ")]
    word = next(i for i, line in enumerate(columns) if "holds value 'French'" in line)
    other = next(i for i, line in enumerate(columns) if "holds value 'France' (approximate" in line)
    assert word < other, found
