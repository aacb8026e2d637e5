"""The ranking rules of search_schema (tools/search/rules.py). Two warehouse rules, in schemas without
declared foreign keys: a table beside a top hit whose name carries a question word, and a bridge table
linking several top hits (its `<entity>_id` columns name them); both say why they were found. And
padding: tables with evidence of their own rank first, and a table whose only link to the query is its
schema says so plainly (keeping such tables is measured: dropping them cost 0.04 all-gold@10 on
Spider 2.0-Snow, where the tables a question needs sit together in one schema)."""

from __future__ import annotations

from pathlib import Path

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.explain import SCHEMA_FILLER
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


def test_schema_only_hits_rank_last_and_say_so(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "w.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA sales")
    con.execute("CREATE SCHEMA hr")
    con.execute("CREATE TABLE sales.invoices (invoice_id INTEGER, total DECIMAL(10,2))")
    con.execute("CREATE TABLE sales.invoice_lines (invoice_id INTEGER, sku VARCHAR)")
    for name in ("warehouses", "carriers", "regions", "currencies", "calendar", "suppliers"):
        con.execute(f"CREATE TABLE sales.{name} (id INTEGER, label VARCHAR)")
    con.execute("CREATE TABLE hr.employees (employee_id INTEGER, full_name VARCHAR)")
    con.close()
    source = open_source(f"duckdb:///{path}", name="w")
    try:
        result = search_schema(
            ToolContext(sources=SourceRegistry([source])), SearchSchema(query="invoice totals", limit=10)
        )
    finally:
        source.close()
    names = [hit.table.split(".")[-1] for hit in result.tables]
    assert set(names[:2]) == {"invoices", "invoice_lines"}
    filler = [SCHEMA_FILLER.format(schema="sales")]
    weak = [i for i, hit in enumerate(result.tables) if hit.why == filler]
    strong = [i for i, hit in enumerate(result.tables) if hit.why != filler]
    assert not weak or min(weak) > max(strong)  # never ahead of a table with evidence of its own
    assert "employees" not in names  # another schema: no evidence at all
