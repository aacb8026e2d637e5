"""The search index (tools/search/index.py): cached per catalog load, and twins — tables with the same
column list — decayed so that copies do not crowd out the table the question names, told apart by
the words their names add, and compared through a sketch of their columns when they are wide."""

from __future__ import annotations

import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.ranking import SearchSchema, search_schema

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


def _names(result) -> list[str]:
    return [t.table for t in result.tables]


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


def test_search_index_is_cached_per_catalog_load(big: ToolContext) -> None:
    search_schema(big, SearchSchema(query="singer"))
    index = big.caches["search:big"]
    search_schema(big, SearchSchema(query="concert"))
    assert big.caches["search:big"] is index
    big.source().catalog(refresh=True)
    search_schema(big, SearchSchema(query="concert"))
    assert big.caches["search:big"] is not index


def test_search_schema_ranks_a_nested_path_for_its_words(tmp_path) -> None:
    """Paths inside nested columns are searched like columns, from the first search on: a new user found
    that search_schema reached a JSON key only after describe_table had run on its table (issue 27)."""
    import duckdb

    from flexsql.tools.catalog import DescribeTable, describe_table
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.search.ranking import SearchSchema, search_schema

    path = tmp_path / "nested.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sessions (visit_id INTEGER, totals JSON, trafficSource JSON)")
    con.execute("CREATE TABLE pageviews (visit_id INTEGER, page VARCHAR)")
    con.execute(
        """INSERT INTO sessions VALUES (1, '{"hits": 3}', '{"source": "(direct)", "medium": "(none)"}')"""
    )
    con.close()
    source = open_source(f"duckdb:///{path}", name="nested")
    ctx = ToolContext(sources=SourceRegistry([source]))
    try:
        first = search_schema(ctx, SearchSchema(query="traffic source medium", limit=5))
        assert first.tables[0].table.endswith("sessions")
        top = {(c.table.rsplit(".", 1)[-1], c.column) for c in first.columns[:2]}
        assert top == {("sessions", "trafficSource.source"), ("sessions", "trafficSource.medium")}, (
            first.to_text()
        )
        describe_table(ctx, DescribeTable(table="sessions"))  # describing it changes nothing
        after = search_schema(ctx, SearchSchema(query="traffic source medium", limit=5))
        assert [(c.table, c.column, c.type) for c in after.columns] == [
            (c.table, c.column, c.type) for c in first.columns
        ]
    finally:
        source.close()
