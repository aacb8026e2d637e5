"""search_schema and find_values on a warehouse-like catalog: shard families, releases, many schemas, no FKs."""

from __future__ import annotations

import pytest

from flexsql.errors import NotFoundError
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.families import families, family_units, question_dates
from flexsql.tools.search.ranking import SearchSchema, search_schema
from flexsql.tools.values.find import FindValues, find_values

FILLER_SCHEMAS = [f"dataset_{i:02d}" for i in range(12)]
EVENT_COLS = (
    "event_date VARCHAR, event_name VARCHAR, user_pseudo_id VARCHAR, platform VARCHAR, geo_country VARCHAR"
)


@pytest.fixture(scope="module")
def warehouse_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    import duckdb

    path = tmp_path_factory.mktemp("wh") / "warehouse_like.duckdb"
    conn = duckdb.connect(str(path))
    stmts = [
        "CREATE SCHEMA analytics",
        "CREATE SCHEMA census",
        "CREATE SCHEMA clinical",
        "CREATE SCHEMA crm",
        "CREATE SCHEMA survey",
    ]
    # 31 daily shards of app events
    for day in range(1, 32):
        stmts.append(f"CREATE TABLE analytics.events_202101{day:02d} ({EVENT_COLS})")
    stmts.append("COMMENT ON TABLE analytics.events_20210131 IS 'app events exported daily'")
    # survey vintages by year and span, and data releases
    for year in range(2015, 2021):
        for span in (1, 5):
            stmts.append(
                f"CREATE TABLE census.state_{year}_{span}yr (geo_id VARCHAR, total_pop DOUBLE, "
                "median_income DOUBLE, households DOUBLE)"
            )
    for r in (24, 30, 35):
        stmts.append(
            f"CREATE TABLE clinical.clinical_gdc_r{r} (case_id VARCHAR, primary_diagnosis VARCHAR, "
            "vital_status VARCHAR, days_to_death DOUBLE)"
        )
    for yy in (14, 15, 16):
        stmts.append(
            f"CREATE TABLE survey.indiv{yy} (respondent_id VARCHAR, occupation VARCHAR, wage DOUBLE)"
        )
    # same shape, different columns: not a family
    stmts.append("CREATE TABLE crm.report_1 (a VARCHAR, b VARCHAR, c VARCHAR)")
    stmts.append("CREATE TABLE crm.report_2 (x DOUBLE, y DOUBLE, z DOUBLE)")
    stmts.append("CREATE TABLE crm.customers (customer_id VARCHAR, customer_name VARCHAR, country VARCHAR)")
    stmts.append("CREATE TABLE crm.suppliers (supplier_id VARCHAR, company VARCHAR, country VARCHAR)")
    stmts.append(
        "CREATE TABLE crm.orders (order_id VARCHAR, customer_id VARCHAR, ship_country VARCHAR, amount DOUBLE)"
    )
    stmts.append("INSERT INTO crm.customers VALUES ('c1', 'Acme', 'France'), ('c2', 'Globex', 'Spain')")
    stmts.append("INSERT INTO crm.suppliers VALUES ('s1', 'Bolt', 'France'), ('s2', 'Nut', 'France')")
    stmts.append("INSERT INTO crm.orders VALUES ('o1', 'c1', 'France', 10), ('o2', 'c2', 'Spain', 5)")
    for i, schema in enumerate(FILLER_SCHEMAS):
        stmts.append(f"CREATE SCHEMA {schema}")
        for j in range(8):
            stmts.append(
                f"CREATE TABLE {schema}.table_{chr(97 + j)}{chr(97 + i)} (k VARCHAR, v DOUBLE, note VARCHAR)"
            )
    conn.execute("BEGIN")
    for s in stmts:
        conn.execute(s)
    conn.execute("COMMIT")
    conn.close()
    return f"duckdb:///{path}"


@pytest.fixture
def wh(warehouse_url: str):
    source = open_source(warehouse_url, name="wh")
    yield ToolContext(sources=SourceRegistry([source]))
    source.close()


def _names(result) -> list[str]:
    return [t.table for t in result.tables]


def test_families_group_same_shape_similar_columns(wh: ToolContext) -> None:
    tables = wh.source().catalog().tables
    found = {f.pattern: len(f.members) for f in families(tables)}
    assert found["events_*"] == 31
    assert found["state_*_*yr"] == 12 and found["clinical_gdc_r*"] == 3 and found["indiv*"] == 3
    assert "report_*" not in found  # same name shape, unrelated columns
    units = family_units(tables)
    assert units["analytics.events_20210105"] == units["analytics.events_20210131"] == "analytics.events_*"


def test_a_family_takes_one_slot_and_names_its_range(wh: ToolContext) -> None:
    result = search_schema(wh, SearchSchema(query="app events by platform", limit=5))
    top = result.tables[0]
    assert top.table == "analytics.events_20210131"  # the latest stands for the family
    assert (top.family, top.family_size) == ("analytics.events_*", 31)
    assert top.family_range == "events_20210101 … events_20210131"
    assert "latest of the family: events_20210131" in top.why
    assert sum(t.table.startswith("analytics.events_") for t in result.tables) == 1
    assert "(family analytics.events_*: 31 tables events_20210101 … events_20210131)" in result.to_text()


@pytest.mark.parametrize(
    ("question", "shard"),
    [
        ("How many app events happened on January 18, 2021?", "analytics.events_20210118"),
        ("events of 2021-01-07 per platform", "analytics.events_20210107"),
        ("users active on 18 January 2021", "analytics.events_20210118"),  # no word matches: the date alone
    ],
)
def test_question_dates_pick_the_shard(wh: ToolContext, question: str, shard: str) -> None:
    top = search_schema(wh, SearchSchema(query=question, limit=5)).tables[0]
    assert top.table == shard
    assert top.why[0] == f"question dates name {shard.split('.')[1]}"


def test_two_digit_years_and_releases(wh: ToolContext) -> None:
    top = search_schema(wh, SearchSchema(query="occupation and wage of respondents in 2016", limit=3)).tables[
        0
    ]
    assert top.table == "survey.indiv16" and top.date_members == ["indiv16"]
    clinical = search_schema(wh, SearchSchema(query="primary diagnosis and vital status", limit=3)).tables[0]
    assert clinical.table == "clinical.clinical_gdc_r35" and clinical.family_size == 3
    acs = search_schema(
        wh, SearchSchema(query="median income by state from the 2018 survey", limit=3)
    ).tables[0]
    assert acs.table in ("census.state_2018_1yr", "census.state_2018_5yr")
    assert set(acs.date_members) == {"state_2018_1yr", "state_2018_5yr"}


def test_date_ranges_name_every_year() -> None:
    assert {"2011", "2012", "2013", "2014"} <= question_dates("from 2011 to 2014")
    assert "20230118" in question_dates("On January 18, 2023, how many")
    assert "201709" in question_dates("in September 2017")
    assert question_dates("the top 10 customers") == set()


def test_distinct_concepts_fill_the_result(wh: ToolContext) -> None:
    names = _names(
        search_schema(wh, SearchSchema(query="customers, their orders and the suppliers", limit=3))
    )
    assert set(names) == {"crm.customers", "crm.orders", "crm.suppliers"}


def test_find_values_schema_and_context(wh: ToolContext) -> None:
    bare = find_values(wh, FindValues(text="France"))
    assert {(m.table, m.column) for m in bare.matches} == {
        ("crm.customers", "country"),
        ("crm.suppliers", "country"),
        ("crm.orders", "ship_country"),
    }
    # the context names the supplier side: that column comes first, and the result says why
    ctx_hit = find_values(
        wh, FindValues(text="France", context="Which suppliers are based in France?")
    ).matches[0]
    assert (ctx_hit.table, ctx_hit.column) == ("crm.suppliers", "country")
    assert ctx_hit.context_words == ["suppliers"]
    assert (
        "context: 'suppliers'"
        in find_values(wh, FindValues(text="France", context="suppliers in France")).to_text()
    )
    shipped = find_values(wh, FindValues(text="France", context="orders shipped to France")).matches[0]
    assert (shipped.table, shipped.column) == ("crm.orders", "ship_country")
    only = find_values(wh, FindValues(text="France", schema="crm", tables=["crm.customers"]))
    assert [(m.table, m.column) for m in only.matches] == [("crm.customers", "country")]
    assert find_values(wh, FindValues(text="France", schema="analytics")).matches == []
    with pytest.raises(NotFoundError, match="schema 'crn' not found; did you mean: crm"):
        find_values(wh, FindValues(text="France", schema="crn"))


# -- tables with the same columns ------------------------------------------------------------------

POST_COLS = (
    "id BIGINT, title VARCHAR, body VARCHAR, tags VARCHAR, view_count BIGINT, score BIGINT, "
    "owner_user_id BIGINT, creation_date TIMESTAMP, answer_count BIGINT"
)
POST_TABLES = (
    "posts_questions",
    "posts_answers",
    "posts_tag_wiki",
    "posts_tag_wiki_excerpt",
    "posts_orphaned_tag_wiki",
    "posts_moderator_nomination",
    "posts_privilege_wiki",
    "posts_wiki_placeholder",
    "stackoverflow_posts",
    "posts_tag_synonyms",
    "posts_questions_archive",
)


@pytest.fixture(scope="module")
def forum_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Stack Overflow-like schema: eleven post tables with one column list, and the tags table."""
    import duckdb

    path = tmp_path_factory.mktemp("forum") / "forum.duckdb"
    conn = duckdb.connect(str(path))
    for name in POST_TABLES:
        conn.execute(f"CREATE TABLE {name} ({POST_COLS})")
    conn.execute(
        "CREATE TABLE tags (id BIGINT, tag_name VARCHAR, count BIGINT, excerpt_post_id BIGINT, "
        "wiki_post_id BIGINT)"
    )
    conn.execute(
        "CREATE TABLE users (id BIGINT, display_name VARCHAR, reputation BIGINT, creation_date TIMESTAMP)"
    )
    conn.close()
    return f"duckdb:///{path}"


def _forum_search(url: str, question: str, **params):
    import dataclasses

    from flexsql.tools.search.index import Params, SearchIndex

    source = open_source(url, name="forum")
    try:
        ctx = ToolContext(sources=SourceRegistry([source]))
        ctx.caches["search:forum"] = SearchIndex(source.catalog(), dataclasses.replace(Params(), **params))
        return search_schema(ctx, SearchSchema(query=question, limit=10))
    finally:
        source.close()


def test_copies_of_one_column_list_do_not_crowd_out_the_table_the_question_names(forum_url: str) -> None:
    question = "the most viewed questions for each of the tags 'android-layout' and 'android-intent'"
    result = _forum_search(forum_url, question)
    names = _names(result)
    assert names[0] == "main.posts_questions"
    assert "main.tags" in names[:10]
    twin = next(
        t for t in result.tables if t.table != "main.posts_questions" and t.table.startswith("main.posts")
    )
    assert any(w.startswith("same columns as ") for w in twin.why)
    # positive control: scored without the twin decay, the eleven post tables fill the list
    crowded = _names(_forum_search(forum_url, question, twin_decay=1.0))
    assert "main.tags" not in crowded[:10]


RESULT_COLS = [
    "result_id",
    "race_id",
    "driver_id",
    "constructor_id",
    "number",
    "grid",
    "position",
    "position_text",
    "position_order",
    "points",
    "laps",
    "time",
    "milliseconds",
    "fastest_lap",
    "fastest_lap_time",
    "fastest_lap_speed",
    "status_id",
    "rank",
]


def test_of_two_twins_the_one_whose_name_adds_no_unasked_word_comes_first(tmp_path) -> None:
    """sprint_results has one column fewer, so plain BM25 puts it first; the question never says sprint."""
    import duckdb

    path = tmp_path / "racing.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE results (" + ", ".join(f"{c} VARCHAR" for c in RESULT_COLS) + ")")
    conn.execute("CREATE TABLE sprint_results (" + ", ".join(f"{c} VARCHAR" for c in RESULT_COLS[:-1]) + ")")
    conn.execute("CREATE TABLE constructors (constructor_id VARCHAR, name VARCHAR, nationality VARCHAR)")
    conn.close()
    url = f"duckdb:///{path}"
    question = "which constructors scored the most points with their fastest lap"
    names = _names(_forum_search(url, question))
    assert names.index("main.results") < names.index("main.sprint_results")
    plain = _names(_forum_search(url, question, twin_unasked=1.0))  # positive control: the shorter one wins
    assert plain.index("main.sprint_results") < plain.index("main.results")


def test_twins_of_wide_tables_are_told_from_a_sketch_of_their_columns() -> None:
    """Tables of thousands of columns are compared through 128 hashes each, close to the exact Jaccard."""
    import heapq
    import zlib

    from flexsql.tools.search.index import SKETCH_SIZE, _jaccard

    def sketch(names: set[str]) -> frozenset[int]:
        return frozenset(heapq.nsmallest(SKETCH_SIZE, {zlib.crc32(n.encode()) for n in names}))

    base = {f"metric_{i}" for i in range(3000)}
    near = (base - {f"metric_{i}" for i in range(150)}) | {f"other_{i}" for i in range(150)}  # exact 0.905
    far = {f"other_{i}" for i in range(3000)}
    assert abs(_jaccard(sketch(base), sketch(near)) - 0.905) < 0.08
    assert _jaccard(sketch(base), sketch(far)) < 0.1
    assert _jaccard(sketch(base), sketch(base)) == 1.0
    small_a, small_b = {"a", "b", "c", "d"}, {"a", "b", "c", "e"}
    assert _jaccard(sketch(small_a), sketch(small_b)) == 3 / 5  # whole sets: exact
