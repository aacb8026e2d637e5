"""find_values (tools/values/find.py), on every engine: case, typos, word order, partial matches, single
words, scoping to tables; and no stale answers — deleted values forgotten, entries rebuilt past their
age limit, new data picked up on refresh."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import duckdb
import pytest

from flexsql.errors import NotFoundError
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.values.find import FindValues, build_value_index, find_values
from tests.support.contexts import context
from tests.support.engines import pg_schema


def _where(match) -> tuple[str, str]:
    return match.table.split(".")[-1].lower(), match.column.lower()


# -- find_values ----------------------------------------------------------------------------------------


def test_find_values_case_insensitive(ctx: ToolContext) -> None:
    result = find_values(ctx, FindValues(text="france"))
    top = result.matches[0]
    assert _where(top) == ("customers", "country")
    assert (top.value, top.count, top.match) == ("France", 2, "case-insensitive")
    assert "customers" in result.to_text().lower() and "'France'" in result.to_text()


def test_find_values_typo_word_order_partial_accents(ctx: ToolContext) -> None:
    typo = find_values(ctx, FindValues(text="Germny")).matches[0]
    assert (_where(typo), typo.value, typo.match) == (("customers", "country"), "Germany", "fuzzy")
    order = find_values(ctx, FindValues(text="Lamp Desk")).matches[0]
    assert (_where(order), order.value, order.match) == (("products", "title"), "Desk Lamp", "word order")
    partial = find_values(ctx, FindValues(text="lamp")).matches[0]
    assert _where(partial) == ("products", "title") and partial.match == "partial"
    assert {partial.value, *partial.others} == {"Blue Lamp", "Desk Lamp"}
    accents = find_values(ctx, FindValues(text="chloe durand")).matches[0]
    assert (accents.value, accents.match) == ("Chloé Durand", "normalized")
    exact = find_values(ctx, FindValues(text="B2B")).matches[0]
    assert (_where(exact), exact.match, exact.count) == (("customers", "segment"), "exact", 2)


def test_find_values_nothing_found_says_so(ctx: ToolContext) -> None:
    result = find_values(ctx, FindValues(text="Zanzibar Quartz"))
    assert result.matches == [] and result.columns_matched == 0
    assert "no column holds it" in result.to_text() and "with every distinct value" in result.to_text()


def test_find_values_falls_back_to_single_words(ctx: ToolContext) -> None:
    """No column holds 'B2C France', but two columns hold its words: say which."""
    result = find_values(ctx, FindValues(text="B2C France"))
    found = {(_where(m), m.value, m.word) for m in result.matches}
    assert found == {(("customers", "segment"), "B2C", "b2c"), (("customers", "country"), "France", "france")}
    assert all(m.match == "one word" for m in result.matches)
    assert "word 'france'" in result.to_text()


def test_find_values_scoped_to_tables(ctx: ToolContext) -> None:
    assert find_values(ctx, FindValues(text="France", tables=["products"])).matches == []
    scoped = find_values(ctx, FindValues(text="France", tables=["customers"]))
    assert [_where(m) for m in scoped.matches] == [("customers", "country")]
    with pytest.raises(NotFoundError, match="did you mean"):
        find_values(ctx, FindValues(text="France", tables=["custmers"]))


@pytest.mark.parametrize("engine", ["duckdb"])
def test_refresh_picks_up_new_data(shop, shop_url: str) -> None:
    import duckdb

    build_value_index(ToolContext(sources=SourceRegistry([shop])))
    shop.close()
    from flexsql.tools.engines.urls import file_path_of

    conn = duckdb.connect(file_path_of(shop_url))
    conn.execute("INSERT INTO customers VALUES (6, 'Fran Ortiz', 'Spain', 'B2C')")
    conn.close()

    reopened = open_source(shop_url, name="shop")
    try:
        ctx = ToolContext(sources=SourceRegistry([reopened]))
        # the file changed: the index rebuilds on its own (issue 13: it once served the old values)
        seen = find_values(ctx, FindValues(text="Spain"))
        assert seen.index_tables_built == 3 and seen.matches[0].value == "Spain"
        stats = build_value_index(ctx, refresh=True)
        assert stats.tables_scanned == 3
        found = find_values(ctx, FindValues(text="Spain")).matches[0]
        assert (_where(found), found.value, found.count) == (("customers", "country"), "Spain", 1)
    finally:
        reopened.close()


# -- no stale answers -------------------------------------------------------------------------------------


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


@pytest.mark.postgres
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


# -- sharded families -------------------------------------------------------------------------------


def test_find_values_gives_a_family_one_line_per_column(tmp_path: Path, monkeypatch) -> None:
    """Twelve daily shards holding the same key are one line naming the family (and how many shards hold
    it), so a column of another kind keeps its slot; a value one shard alone holds names that shard."""
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "events.duckdb"
    conn = duckdb.connect(str(path))
    for day in range(1, 13):
        shard = f"events_201801{day:02d}"
        extra = ", platform VARCHAR" if day > 6 else ""  # two column sets: the group's pattern reads both
        conn.execute(f"CREATE TABLE {shard} (event_name VARCHAR, prop_key VARCHAR{extra})")
        name = "level_first_open" if day == 3 else "level_start"
        row = "'first_open_time'" + (", 'ANDROID'" if day > 6 else "")
        conn.execute(f"INSERT INTO {shard} VALUES ('{name}', {row}), ('level_end', {row})")
    conn.close()
    ctx = context(f"duckdb:///{path}")
    found = find_values(ctx, FindValues(text="first open", limit=3))
    lines = {_where(m): m for m in found.matches}
    key = lines[("events_*", "prop_key")]
    assert (key.value, key.count, key.shards) == ("first_open_time", 24, 12)
    assert "main.events_*.prop_key = 'first_open_time' (24 rows in 12 shards;" in found.to_text()
    assert lines[("events_20180103", "event_name")].value == "level_first_open"
    assert found.columns_matched == 2
    # one column set's shards alone hold a value: the line names that family as list_tables does
    android = find_values(ctx, FindValues(text="ANDROID")).matches
    assert [(m.table, m.column, m.shards) for m in android] == [
        ("main.events_20180107-20180112", "platform", 6)
    ]
