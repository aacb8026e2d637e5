"""recall and remember, in-process (the API the agent calls) and through the tool registry; staleness
when the schema changes; search_schema and find_join_path reading the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from flexsql.errors import InvalidArgument, QueryError
from flexsql.tools.joins import FindJoinPath, find_join_path
from flexsql.tools.knowledge.learn import learn, remember_query
from flexsql.tools.knowledge.recall import recall
from flexsql.tools.knowledge.store import read_store
from flexsql.tools.search.ranking import SearchSchema, search_schema
from flexsql.tools.toolbox import TOOLS

PAIRS = [
    ("How many singers are there?", "SELECT count(*) FROM singer"),
    ("Names of singers from France", "SELECT name FROM singer WHERE country = 'France'"),
    ("Which venue is the largest?", "SELECT location FROM venue ORDER BY capacity DESC LIMIT 1"),
    (
        "Concerts held at each venue",
        "SELECT v.location, count(*) FROM concert c JOIN venue v ON c.venue_code = v.code GROUP BY v.location",
    ),
]


def _learn_pairs(music, tmp_path: Path, pairs=PAIRS) -> None:
    file = tmp_path / "pairs.jsonl"
    file.write_text("".join(json.dumps({"question": q, "sql": s}) + "\n" for q, s in pairs))
    learn(music, file, verified_by="ana")


def test_recall_ranks_by_the_tables_the_question_links_to(ctx, music, tmp_path: Path) -> None:
    _learn_pairs(music, tmp_path)
    found = recall(ctx, "How many concerts took place per venue location?", limit=2)
    first = found.queries[0]
    assert first.question == "Concerts held at each venue" and first.verified_by == "ana"
    assert "venue" in first.why and "concert" in first.why
    assert found.verified == 4 and found.stale == 0
    text = found.to_text()
    assert "Concerts held at each venue (verified by ana" in text and "JOIN venue" in text


def test_the_tool_returns_queries_with_question_and_sql(ctx, music, tmp_path: Path) -> None:
    _learn_pairs(music, tmp_path)
    result = TOOLS.call(ctx, "recall", {"question": "singers of France", "limit": 1}).model_dump()
    (query,) = result["queries"]
    assert query["question"] == "Names of singers from France"
    assert query["sql"] == "SELECT name FROM singer WHERE country = 'France'"


def test_an_empty_store_says_how_to_fill_it(ctx) -> None:
    found = recall(ctx, "How many singers?")
    assert found.queries == [] and "flexsql learn" in (found.note or "")


def test_documents_are_recalled_as_passages(ctx, music, tmp_path: Path) -> None:
    doc = tmp_path / "glossary.md"
    doc.write_text(
        "# Terms\n\nA headliner is the singer who performs first at a concert.\n\n"
        "# Money\n\nRevenue is the ticket price times tickets sold.\n"
    )
    learn(music, doc)
    (passage,) = recall(ctx, "who is the headliner of a concert", limit=1).passages[:1]
    assert (
        passage.document == "glossary.md" and passage.heading == "Terms" and "performs first" in passage.text
    )


def test_a_query_the_schema_no_longer_fits_is_never_recalled(
    music_url: str, store: Path, tmp_path: Path
) -> None:
    from flexsql.tools.engines import SourceRegistry, open_source
    from flexsql.tools.runtime.context import ToolContext

    src = open_source(music_url, name="music", knowledge=str(store))
    _learn_pairs(src, tmp_path)
    src.close()
    path = music_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:  # the schema changes under the store
        conn.execute("ALTER TABLE venue RENAME COLUMN capacity TO seats")
    src = open_source(music_url, name="music", knowledge=str(store))
    try:
        found = recall(ToolContext(sources=SourceRegistry([src])), "Which venue is the largest?", limit=4)
    finally:
        src.close()
    assert "Which venue is the largest?" not in [q.question for q in found.queries]
    assert found.stale == 1 and "no longer fit the schema" in found.to_text()


def test_remember_runs_the_sql_and_keeps_the_result_shape(ctx, store: Path) -> None:
    done = remember_query(
        ctx,
        "French singers and their ages",
        "SELECT name, age FROM singer WHERE country = 'France'",
        verified_by="ana",
    )
    assert done.stored and done.result_columns == ["name", "age"] and done.result_rows == 2
    (held,) = read_store(store).queries
    assert held.origin == "remember" and held.verified_by == "ana" and held.result_columns == ["name", "age"]
    again = remember_query(
        ctx, "French singers and their ages", "SELECT name, age FROM singer WHERE country = 'France'"
    )
    assert not again.stored and len(read_store(store).queries) == 1
    assert recall(ctx, "ages of the French singers").queries[0].question == "French singers and their ages"


@pytest.mark.parametrize(
    ("sql", "error", "said"),
    [
        ("SELECT name FROM singer WHERE country = 1 +", InvalidArgument, "remember refused"),
        ("SELECT s.nickname FROM singer AS s", InvalidArgument, "schema lacks"),
        ("SELECT nickname FROM singer", QueryError, "failed when run .no such column: nickname"),
        (
            "SELECT name FROM singer WHERE age / (age - age) > 1 AND abs(-9223372036854775808) > 0",
            QueryError,
            "failed when run",
        ),
        ("DELETE FROM singer", InvalidArgument, "not a query"),
    ],
)
def test_remember_refuses_sql_that_fails_and_stores_nothing(
    ctx, store: Path, sql: str, error: type, said: str
) -> None:
    with pytest.raises(error, match=said):
        remember_query(ctx, "A question", sql)
    assert not (store / "queries.yaml").exists()


def test_search_schema_reads_the_stores_synonyms_and_descriptions(ctx, music, tmp_path: Path) -> None:
    before = search_schema(ctx, SearchSchema(query="vocalists", limit=3))
    assert not before.tables or before.tables[0].table != "main.singer"
    model = tmp_path / "model.yaml"
    model.write_text(
        "tables:\n  - name: artists\n    synonyms: [vocalists]\n    base_table: {schema: main, table: singer}\n"
        "    dimensions:\n      - name: homeland\n        expr: country\n        description: nation of birth\n"
    )
    learn(music, model)
    after = search_schema(ctx, SearchSchema(query="vocalists by nation", limit=3))
    assert after.tables[0].table == "main.singer"
    assert "vocalists" in " ".join(after.tables[0].why)
    assert any(c.column == "country" for c in after.columns[:3])


def test_find_join_path_offers_joins_learned_from_a_query_log(ctx, music, tmp_path: Path) -> None:
    before = find_join_path(ctx, FindJoinPath(tables=["performs", "singer"]))
    assert all(j.kind != "learned" for j in before.joins)
    log = tmp_path / "history.sql"
    log.write_text("SELECT s.name FROM performs p JOIN singer s ON p.artist = s.singer_id;\n" * 3)
    learn(music, log)
    after = find_join_path(ctx, FindJoinPath(tables=["performs", "singer"]))
    (join,) = after.joins
    assert join.condition() == "main.performs.artist = main.singer.singer_id"
    assert join.kind == "learned" and join.evidence == "used in 3 queries (history.sql 3)"
    assert "[learned: used in 3 queries (history.sql 3)]" in after.to_text()


def test_confirmed_pairs_in_memory_are_stored_like_a_files(ctx, music, store: Path) -> None:
    from flexsql.tools.knowledge.learn import learn_pairs

    report = learn_pairs(
        music,
        [
            ("Who is the oldest singer?", "SELECT name FROM singer ORDER BY age DESC LIMIT 1"),
            ("Broken", "SELECT FROM"),
        ],
        origin="conversation c1",
        verified_by="ana",
    )
    assert (report.added, report.rejected) == (1, 1)
    (held,) = read_store(store).queries
    assert (held.origin, held.verified_by) == ("conversation c1#0", "ana")
    assert recall(ctx, "oldest singer").queries[0].id == held.id
