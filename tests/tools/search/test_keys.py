"""Join links inferred from names (tools/search/keys.py): the rules on catalogs built in memory, and
search_schema on a catalog without foreign keys (links lift hub tables; acronyms)."""

from __future__ import annotations

import dataclasses

import pytest

from flexsql.tools.engines import Column, ForeignKey, SourceRegistry, TableInfo, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.index import search_index
from flexsql.tools.search.keys import inferred_links, key_entity, key_links
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


# -- key_links: the rules, on catalogs built in memory (no database) ------------------------------------


def _table(name: str, *cols: str, pk: str | None = None, fks: list[ForeignKey] | None = None) -> TableInfo:
    """cols as 'name TYPE'."""
    columns = [Column(name=c.split()[0], type=c.split()[1], primary_key=c.split()[0] == pk) for c in cols]
    return TableInfo(schema="main", name=name, columns=columns, foreign_keys=fks or [])


def _conditions(tables: list[TableInfo]) -> dict[str, str]:
    """'a.x = b.y' (referencing side first) -> evidence, for every link."""
    return {
        f"{tables[lk.table].name}.{lk.columns[0]} = {tables[lk.ref_table].name}.{lk.ref_columns[0]}": lk.evidence
        for lk in key_links(tables)
    }


def test_same_name_points_at_the_table_owning_the_key() -> None:
    tables = [
        _table("dogs", "dog_id INTEGER", "breed_code VARCHAR", "name VARCHAR"),
        _table("breeds", "breed_code VARCHAR", "breed_name VARCHAR"),
        _table("student", "StuID INTEGER", "LName VARCHAR"),
        _table("has_pet", "StuID INTEGER", "PetID INTEGER"),
        _table("pets", "PetID INTEGER", "PetType VARCHAR"),
    ]
    found = _conditions(tables)
    assert "dogs.breed_code = breeds.breed_code" in found
    assert "has_pet.StuID = student.StuID" in found
    assert "has_pet.PetID = pets.PetID" in found
    assert not any("name" in c.lower().split(" = ")[0].split(".")[1] for c in found)  # names are no keys


def test_role_prefixes_glued_names_and_table_plus_column() -> None:
    tables = [
        _table(
            "students", "student_id INTEGER", "current_address_id INTEGER", "permanent_address_id INTEGER"
        ),
        _table("addresses", "address_id INTEGER", "line_1 VARCHAR"),
        _table(
            "flights", "airline INTEGER", "flightno INTEGER", "sourceairport VARCHAR", "destairport VARCHAR"
        ),
        _table("airlines", "uid INTEGER", "airline VARCHAR", "abbreviation VARCHAR"),
        _table("airports", "city VARCHAR", "airportcode VARCHAR", "airportname VARCHAR"),
        _table("city", "id INTEGER", "name VARCHAR", "countrycode VARCHAR"),
        _table("country", "code VARCHAR", "name VARCHAR"),
    ]
    found = _conditions(tables)
    assert found["students.current_address_id = addresses.address_id"] == "role prefix current_ stripped"
    assert found["students.permanent_address_id = addresses.address_id"] == "role prefix permanent_ stripped"
    assert found["flights.airline = airlines.uid"] == "named after table airlines"
    assert "flights.airline = airlines.airline" not in found  # a number never joins text
    assert found["flights.sourceairport = airports.airportcode"] == "role prefix source stripped"
    assert found["flights.destairport = airports.airportcode"] == "role prefix dest stripped"
    assert found["city.countrycode = country.code"] == "table country + column code"


def test_declared_keys_come_first_and_are_not_inferred_again() -> None:
    fks = [
        ForeignKey(columns=["source"], ref_table="airports", ref_columns=["code"]),
        ForeignKey(columns=["dest"], ref_table="airports", ref_columns=["code"]),
    ]
    tables = [
        _table("routes", "source VARCHAR", "dest VARCHAR", "airport_code VARCHAR", fks=fks),
        _table("airports", "code VARCHAR", "name VARCHAR", pk="code"),
    ]
    links = key_links(tables)
    assert [(lk.columns, lk.kind) for lk in links[:2]] == [(("source",), "declared"), (("dest",), "declared")]
    inferred = [lk for lk in links if not lk.declared]
    assert [(lk.columns, lk.ref_columns) for lk in inferred] == [(("airport_code",), ("code",))]
    assert inferred[0].weight < 1.0


def test_a_name_shared_by_many_tables_links_each_to_its_owner_only() -> None:
    tables = [_table("customers", "customer_id INTEGER", "name VARCHAR")] + [
        _table(f"t{i}", "row_id INTEGER", "customer_id INTEGER", "created_at TIMESTAMP") for i in range(8)
    ]
    links = key_links(tables)
    assert {tables[lk.ref_table].name for lk in links} == {"customers"}
    assert len(links) == 8  # no sibling pairs among the eight, no created_at links


def test_inferred_links_keep_their_signature_for_search() -> None:
    tables = [
        _table("races", "race_id INTEGER", "name VARCHAR"),
        _table("pit_stops", "race_id INTEGER", "stop INTEGER"),
        _table("drivers", "driver_id INTEGER"),
    ]
    assert inferred_links(tables, [0, 0, 0]) == [(1, 0, "race_id")]
    assert inferred_links(tables, [0, 1, 0]) == []  # never across schemas
