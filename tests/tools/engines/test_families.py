"""Sharded families read as one table (tools/engines/families.py) on every engine: a family reference
with `*` in SQL is expanded into the union of its shards before the guard and the engine, aligned by
column name; two column sets of one stem are two families with distinct names that every tool takes."""

from __future__ import annotations

import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import InvalidArgument, NotFoundError, RefusedError
from flexsql.tools.catalog import DescribeTable, ListTables, describe_table, list_tables
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.query import RunQuery, SampleRows, run_query, sample_rows
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.sql.guard import check_sql
from flexsql.tools.validate import ValidateSql, validate_sql
from flexsql.tools.values.distinct import DistinctValues, distinct_values
from flexsql.tools.values.profile import ProfileColumn, profile_column
from tests.support.engines import engine_params
from tests.support.warehouse import ROWS_2017, SHARDS_2016, SHARDS_2017, TOTAL_ROWS, warehouse_url


@pytest.fixture
def ga(engine, tmp_path):
    with warehouse_url(engine, tmp_path) as url:
        source = open_source(url, name="ga", limits=LimitsConfig(family_shards=10))
        yield ToolContext(sources=SourceRegistry([source]), limits=LimitsConfig(family_shards=10))
        source.close()


def _count(ctx: ToolContext, sql: str) -> int:
    out = run_query(ctx, RunQuery(sql=sql))
    return int(out.rows[0][0])


def test_a_family_reference_reads_the_union_of_its_shards(ga):
    assert _count(ga, "SELECT count(*) FROM ga_sessions_*") == TOTAL_ROWS
    assert _count(ga, "SELECT count(*) FROM ga_sessions_2017* AS s WHERE s.visit_id >= 0") == ROWS_2017
    # columns are aligned by name: the 2016 shards have no device, which reads NULL there
    assert _count(ga, "SELECT count(device) FROM ga_sessions_*") == ROWS_2017
    # the group's pattern reads the group, not ga_sessions_notes, which its glob would also match
    assert _count(ga, "SELECT count(*) FROM ga_sessions_n*") == 1
    out = run_query(ga, RunQuery(sql="SELECT count(*) FROM ga_sessions_*"))
    assert out.sql == "SELECT count(*) FROM ga_sessions_*"  # what the answer shows stays the user's SQL
    assert "UNION ALL" in (out.expanded_sql or "")
    assert f"ga_sessions_* read {TOTAL_ROWS - 8} table(s)" in out.to_text()
    # joined with itself, in a FROM list, or in a subquery
    sql = (
        "SELECT count(*) FROM (SELECT visit_id FROM ga_sessions_2016*) a, ga_sessions_2016* b "
        "WHERE a.visit_id = b.visit_id"
    )
    assert _count(ga, sql) == 4


def test_strings_and_arithmetic_are_not_family_references(ga):
    out = run_query(
        ga, RunQuery(sql="SELECT 'FROM ga_sessions_*' AS t, 2*3 AS six, visit_id FROM ga_sessions_20161230")
    )
    assert out.rows[0][:2] == ["FROM ga_sessions_*", 6] and not out.expanded_sql


def test_the_shard_limit_is_a_setting_with_a_clear_error(ga):
    low = open_source(ga.source()._url, name="low", limits=LimitsConfig(family_shards=4))
    try:
        with pytest.raises(InvalidArgument, match=r"read 5 tables .*more than the 4 .*family_shards"):
            low.execute("SELECT count(*) FROM ga_sessions_*")
        assert low.execute("SELECT count(*) FROM ga_sessions_2017*").rows[0][0] == ROWS_2017
    finally:
        low.close()


def test_a_glob_that_matches_nothing_says_so(ga):
    with pytest.raises(NotFoundError, match="matches no table"):
        ga.source().execute("SELECT * FROM ga_visits_*")


def test_the_guard_checks_the_expanded_sql(ga):
    # positive control: the family alone runs
    assert _count(ga, "SELECT count(*) FROM ga_sessions_* AS s") == TOTAL_ROWS
    attacks = [
        "SELECT count(*) FROM ga_sessions_*; DROP TABLE ga_sessions_20161230",
        "SELECT * FROM ga_sessions_* WHERE visit_id IN (SELECT 1) UNION ALL SELECT 1; DELETE FROM ga_sessions_20161230",
        'SELECT * FROM "ga_sessions_*; DROP TABLE ga_sessions_20161230; --"',
    ]
    for sql in attacks:
        with pytest.raises((RefusedError, NotFoundError)):
            ga.source().execute(sql)
    assert _count(ga, "SELECT count(*) FROM ga_sessions_20161230") == 2  # nothing was dropped


HOSTILE = 'ga_sessions_2099"; DROP TABLE ga_sessions_20161230; --'


def test_an_attack_hidden_in_a_family_reference_is_refused(engine, tmp_path):
    """The guard reads the SQL as expanded: a range name is no SQL the guard could parse, yet the
    statement it hides is refused as a second statement, not as a parse failure. A shard whose name
    is itself SQL is read as a table (quoted by the expansion), and nothing it names runs."""
    quoted = '"' + HOSTILE.replace('"', '""') + '"'
    extra = [
        f"CREATE TABLE {{prefix}}{quoted} (visit_id INTEGER)",
        f"INSERT INTO {{prefix}}{quoted} VALUES (1)",
    ]
    with warehouse_url(engine, tmp_path, extra) as url:
        source = open_source(url, name="ga")
        try:
            rng = f"{SHARDS_2017[0]}-{SHARDS_2017[-1][12:]}"
            with pytest.raises(RefusedError, match="could not be parsed"):
                check_sql(f"SELECT count(*) FROM {rng}", source.engine)  # unexpanded: no SQL
            assert source.execute(f"SELECT count(*) FROM {rng}").rows[0][0] == ROWS_2017
            with pytest.raises(RefusedError, match="2 statements in one call"):
                source.execute(f"SELECT count(*) FROM {rng}; DROP TABLE {SHARDS_2016[0]}")
            with pytest.raises(RefusedError, match="2 statements in one call"):
                source.execute(f"SELECT count(*) FROM {rng} AS s; DELETE FROM {SHARDS_2016[0]}")
            read = source.execute("SELECT count(*) FROM ga_sessions_2099*")
            assert read.rows[0][0] == 1 and read.families[0].shards == [HOSTILE]
            assert source.execute(f"SELECT count(*) FROM {SHARDS_2016[0]}").rows[0][0] == 2  # nothing dropped
        finally:
            source.close()


def test_two_column_sets_are_two_families_every_tool_takes(ga):
    listing = list_tables(ga, ListTables())
    fams = [t for t in listing.tables if t.kind == "family"]
    names = [t.name.rsplit(".", 1)[-1].lower() for t in fams]
    assert names == [f"{SHARDS_2016[0]}-{SHARDS_2016[-1][12:]}", f"{SHARDS_2017[0]}-{SHARDS_2017[-1][12:]}"]
    assert "ga_sessions_* (5 tables)" in listing.to_text().lower()
    catalog = ga.source().catalog()
    for fam in fams + [None]:
        name = fam.name if fam else "ga_sessions_*"
        assert catalog.resolve(name).shards  # the agent's link check resolves it
        described = describe_table(ga, DescribeTable(table=name))
        assert "visit_id" in [c.name.lower() for c in described.columns] and described.family
        rows = sample_rows(ga, SampleRows(table=name, limit=3))
        assert rows.row_count == 3
        counts = distinct_values(ga, DistinctValues(table=name, column="channel"))  # any spelling
        assert {v.value for v in counts.values} == {"Direct", "Organic Search"}
        profile = profile_column(ga, ProfileColumn(table=name, column="visit_id"))
        assert profile.rows == (TOTAL_ROWS if fam is None else fam.family_size * (2 if "2016" in name else 3))
    shard = describe_table(ga, DescribeTable(table=SHARDS_2017[0]))
    assert shard.family and "3 tables" in shard.family


# not on fakesnow: it runs no EXPLAIN, of a family or of a plain table, and answers one with server
# errors that the connector retries for about 20 s
@pytest.mark.parametrize("engine", engine_params("duckdb", "sqlite", "postgres"), indirect=True)
def test_validate_sql_checks_the_union(ga, engine):
    assert validate_sql(ga, ValidateSql(sql="SELECT count(*) FROM ga_sessions_2017*")).valid


def test_an_unqualified_family_in_another_schema_and_its_listed_name(warehouse):
    """The listed name (the pattern of one column set) reads only its shards, though a glob of the same
    text would also take ga_sessions_summary; a family outside the default schema needs no schema."""
    source = warehouse.source()
    read = source.execute("SELECT count(*) FROM ga_sessions_*")
    assert read.rows[0][0] == 0 and len(read.families[0].shards) == 31
    assert source.execute("SELECT count(*) FROM analytics.ga_sessions_2024010*").families[0].shards[-1] == (
        "ga_sessions_20240109"
    )
    glob = source.execute("SELECT count(*) FROM analytics.ga_sessions_s*")
    assert glob.families[0].shards == ["ga_sessions_summary"]


def test_every_tool_names_a_family_alike(ga):
    """search_schema names a column set's family as list_tables and describe_table do (not search's own
    grouping of both column sets), and says which pattern reads them all; footers print plain names."""
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    listing = list_tables(ga, ListTables())
    newest = next(t for t in listing.tables if t.kind == "family" and "2017" in t.name)
    hit = search_schema(ga, SearchSchema(query="sessions channel", limit=3)).tables[0]
    assert hit.family == newest.name and hit.family_size == 3
    schema = newest.name[: -len(newest.name.rsplit(".", 1)[-1])]
    expected = f"one column set of {schema}ga_sessions_* (5 tables), which reads them all"
    assert (hit.family_reads_all or "").lower() == expected.lower()
    assert newest.family_of == hit.family_reads_all
    described = describe_table(ga, DescribeTable(table=SHARDS_2017[-1]))
    assert described.family == f"{newest.name} (3 tables; {hit.family_reads_all})"
    # sample_rows quotes the name it reads; its footer prints it as run_query's does
    sampled = sample_rows(ga, SampleRows(table=newest.name, limit=1)).to_text()
    ran = run_query(ga, RunQuery(sql=f"SELECT * FROM {newest.name}")).to_text()
    footers = [line for text in (sampled, ran) for line in text.splitlines() if line.startswith("family:")]
    bare = newest.name.rsplit(".", 1)[-1]  # SQLite names a table without its schema
    read = f"read 3 table(s): {SHARDS_2017[0]} … {SHARDS_2017[-1]}".lower()
    assert [f.lower() for f in footers] in (
        [f"family: {n} {read}".lower() for n in (first, newest.name)] for first in (newest.name, bare)
    )
