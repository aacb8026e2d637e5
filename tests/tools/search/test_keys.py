"""search_schema on a catalog without foreign keys: join links inferred from `<entity>_id` names, acronyms."""

from __future__ import annotations

import dataclasses

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.index import search_index
from flexsql.tools.search.keys import key_entity
from flexsql.tools.search.ranking import SearchSchema, search_schema


@pytest.fixture()
def ctx(tmp_path) -> ToolContext:
    import duckdb

    path = tmp_path / "racing.duckdb"
    conn = duckdb.connect(str(path))
    for stmt in [
        "CREATE SCHEMA f1",
        "CREATE SCHEMA weather",
        "CREATE TABLE f1.races (race_id BIGINT, name VARCHAR, year BIGINT, circuit VARCHAR)",
        "CREATE TABLE f1.drivers (driver_id BIGINT, forename VARCHAR, surname VARCHAR)",
        "CREATE TABLE f1.pit_stops (race_id BIGINT, driver_id BIGINT, stop BIGINT, lap BIGINT, duration DOUBLE)",
        "CREATE TABLE f1.lap_positions (race_id BIGINT, driver_id BIGINT, lap BIGINT, position BIGINT)",
        "CREATE TABLE f1.liveries (team VARCHAR, colour VARCHAR)",
        "CREATE TABLE weather.ghcnd_stations (station VARCHAR, latitude DOUBLE, longitude DOUBLE)",
        "CREATE TABLE weather.observations (station VARCHAR, day DATE, precipitation DOUBLE)",
    ]:
        conn.execute(stmt)
    conn.close()
    source = open_source(f"duckdb:///{path}", name="racing")
    context = ToolContext(sources=SourceRegistry([source]))
    yield context
    source.close()


def test_key_entity_reads_common_spellings() -> None:
    assert key_entity("race_id") == "race"
    assert key_entity("raceId") == "race"
    assert key_entity("PERSON_KEY") == "person"
    assert key_entity("id") is None
    assert key_entity("paid") is None  # too short to name a table: not a key


def test_hub_table_the_question_never_names_is_found_through_its_key(ctx: ToolContext) -> None:
    result = search_schema(ctx, SearchSchema(query="pit stop duration and lap position on each lap", limit=5))
    names = [t.table for t in result.tables]
    assert names[:2] == ["f1.pit_stops", "f1.lap_positions"] or names[:2] == [
        "f1.lap_positions",
        "f1.pit_stops",
    ]
    assert "f1.races" in names  # no word of the question names it: only the race_id columns link it
    races = next(t for t in result.tables if t.table == "f1.races")
    assert any("by race_id (inferred from the name)" in why for why in races.why), races.why
    # same schema, no link: below, or (padding since fae66e2) not returned at all
    assert "f1.liveries" not in names or names.index("f1.races") < names.index("f1.liveries")

    engine = search_index(ctx, ctx.source(None))
    engine.params = dataclasses.replace(engine.params, inferred_share=0.0)
    without = [
        t.table
        for t in search_schema(
            ctx, SearchSchema(query="pit stop duration and lap position on each lap")
        ).tables
    ]
    # only the schema would lift it then: padding, not a hit
    assert "f1.races" not in without or without.index("f1.races") > without.index("f1.liveries")


def test_acronym_matches_the_catalog_word_it_begins(ctx: ToolContext) -> None:
    result = search_schema(ctx, SearchSchema(query="the nearest GHCN station to the circuit", limit=3))
    assert result.tables[0].table == "weather.ghcnd_stations"
    # a lower-case word is not stretched the same way: 'obs' is no acronym
    assert "weather.observations" not in [
        t.table for t in search_schema(ctx, SearchSchema(query="obs")).tables
    ]
