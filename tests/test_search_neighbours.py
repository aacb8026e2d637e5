"""Two warehouse rules of search_schema, in schemas without declared foreign keys: a table beside a
top hit whose name carries a question word, and a bridge table linking several top hits (its
`<entity>_id` columns name them). Both say why they were found."""

from __future__ import annotations

from pathlib import Path

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.ranking import SearchSchema, search_schema


def _search(path: Path, statements: list[str], query: str) -> list[tuple[str, list[str]]]:
    import duckdb

    con = duckdb.connect(str(path))
    for statement in statements:
        con.execute(statement)
    con.close()
    source = open_source(f"duckdb:///{path}", name="w")
    try:
        result = search_schema(
            ToolContext(sources=SourceRegistry([source])), SearchSchema(query=query, limit=10)
        )
    finally:
        source.close()
    return [(hit.table, hit.why) for hit in result.tables]


def test_a_bridge_table_between_top_hits_is_found_and_says_so(tmp_path: Path) -> None:
    filler = [f"CREATE TABLE racing.archive_{i} (archive_id INTEGER, note VARCHAR)" for i in range(12)]
    hits = _search(
        tmp_path / "f1.duckdb",
        [
            "CREATE SCHEMA racing",
            "CREATE SCHEMA other",
            "CREATE TABLE racing.drivers (driver_id INTEGER, forename VARCHAR, surname VARCHAR)",
            "CREATE TABLE racing.constructors (constructor_id INTEGER, name VARCHAR, nationality VARCHAR)",
            "CREATE TABLE racing.results (result_id INTEGER, driver_id INTEGER, constructor_id INTEGER, points DOUBLE)",
            "CREATE TABLE other.unrelated (x INTEGER)",
            *filler,
        ],
        "which drivers and constructors",
    )
    names = [name for name, _ in hits]
    assert set(names[:3]) == {"racing.drivers", "racing.constructors", "racing.results"}, hits
    why = dict(hits)["racing.results"]
    assert "joins constructors and drivers" in why, why


def test_a_table_beside_a_top_hit_that_names_a_question_word(tmp_path: Path) -> None:
    """Several schemas have a 'stations' table; the one beside the top hit (the weather shards) wins."""
    hits = _search(
        tmp_path / "noaa.duckdb",
        [
            "CREATE SCHEMA noaa_gsod",
            "CREATE SCHEMA metro",
            "CREATE SCHEMA fuel",
            *[
                f"CREATE TABLE noaa_gsod.gsod{y} (stn VARCHAR, temp DOUBLE, prcp DOUBLE, da VARCHAR)"
                for y in range(2010, 2016)
            ],
            "COMMENT ON TABLE noaa_gsod.gsod2015 IS 'daily weather summaries: temperature and precipitation'",
            "CREATE TABLE noaa_gsod.stations (usaf VARCHAR, name VARCHAR, lat DOUBLE, lon DOUBLE)",
            "CREATE TABLE metro.stations (station_id VARCHAR, name VARCHAR, line VARCHAR)",
            "CREATE TABLE fuel.stations (station_id VARCHAR, brand VARCHAR, price DOUBLE)",
        ],
        "daily weather temperature at the stations",
    )
    names = [name for name, _ in hits]
    assert names[0].startswith("noaa_gsod.gsod"), hits
    # equal on their own ('name matches stations'), the one beside the weather shards ranks first
    assert names.index("noaa_gsod.stations") < min(
        names.index("metro.stations"), names.index("fuel.stations")
    ), hits
