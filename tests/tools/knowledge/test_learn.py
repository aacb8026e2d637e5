"""`learn`: every import format into the knowledge store, staleness, per-item reports, idempotent imports,
and bad input that writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from flexsql.errors import InvalidArgument
from flexsql.tools.knowledge import formats
from flexsql.tools.knowledge.learn import learn
from flexsql.tools.knowledge.store import read_store

PAIRS = [
    {"question": "How many singers are there?", "query": "SELECT count(*) FROM singer"},
    {
        "question": "Which singers performed in 2014?",
        "query": "SELECT DISTINCT s.name FROM singer AS s JOIN performs AS p ON p.artist = s.singer_id "
        "JOIN concert AS c ON c.concert_id = p.concert_ref WHERE c.year = 2014",
    },
    {"question": "List the bands", "query": "SELECT name FROM band"},  # no such table: stale
    {"question": "Broken one", "query": "SELEC name FROM singer"},  # does not parse: rejected
    {"question": "Drop it", "query": "DROP TABLE singer"},  # not a query: rejected
    {"question": "", "query": "SELECT 1"},  # no question: rejected
]


def _files(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def test_spider_json_is_checked_item_by_item_and_imported_once(music, store: Path, tmp_path: Path) -> None:
    file = tmp_path / "spider.json"
    file.write_text(json.dumps(PAIRS))
    report = learn(music, file, verified_by="ana")
    assert (report.added, report.stale, report.rejected) == (2, 1, 3)
    reasons = {item.origin: item.reason or "" for item in report.items}
    assert "band" in reasons["spider.json#2"] and "not in the schema" in reasons["spider.json#2"]
    assert "SELEC is not a SQL statement" in reasons["spider.json#3"]
    assert "DROP" in reasons["spider.json#4"] or "read-only" in reasons["spider.json#4"]
    assert "no question" in reasons["spider.json#5"]

    held = read_store(store)
    by_question = {q.question: q for q in held.queries}
    assert set(by_question) == {
        "How many singers are there?",
        "Which singers performed in 2014?",
        "List the bands",
    }
    joined = by_question["Which singers performed in 2014?"]
    assert joined.status == "verified" and joined.verified_by == "ana" and joined.verified_at
    assert sorted(joined.tables) == ["main.concert", "main.performs", "main.singer"]
    assert by_question["List the bands"].status == "stale"
    # the verified query's joins and filters are facts, counted once
    joins = {(j.left, j.right): j.count for j in held.facts.joins}
    assert joins[("main.performs.artist", "main.singer.singer_id")] == 1
    assert any(f.condition == "main.concert.year = 2014" for f in held.facts.filters)

    before = _files(store)
    again = learn(music, file, verified_by="someone else")
    assert (again.added, again.known, again.written) == (0, 3, [])
    assert _files(store) == before  # the same file twice: the same bytes


def test_bird_json_keeps_evidence_and_a_multi_database_file_keeps_this_one(
    music, store: Path, tmp_path: Path
) -> None:
    file = tmp_path / "bird.json"
    file.write_text(
        json.dumps(
            [
                {
                    "db_id": "music",
                    "question": "Singers older than the French average?",
                    "SQL": "SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer WHERE country = 'France')",
                    "evidence": "French refers to country = 'France'",
                },
                {"db_id": "other_db", "question": "Anything", "SQL": "SELECT 1"},
            ]
        )
    )
    report = learn(music, file)
    assert report.added == 1 and report.skipped == 1
    (query,) = read_store(store).queries
    assert query.evidence == "French refers to country = 'France'"
    literals = {(x.column, x.value) for x in read_store(store).facts.literals}
    assert ("main.singer.country", "France") in literals


def test_jsonl_pairs(music, store: Path, tmp_path: Path) -> None:
    file = tmp_path / "pairs.jsonl"
    file.write_text(
        '{"question": "Oldest singer", "sql": "SELECT name FROM singer ORDER BY age DESC LIMIT 1"}\n\n'
        '{"question": "Venues by size", "sql": "SELECT location FROM venue ORDER BY capacity"}\n'
    )
    assert learn(music, file).added == 2
    assert [q.origin for q in sorted(read_store(store).queries, key=lambda q: q.origin or "")] == [
        "pairs.jsonl:1",
        "pairs.jsonl:3",
    ]


CORTEX = """
name: Music
tables:
  - name: artists
    description: People who sing at our concerts.
    synonyms: [performers, vocalists]
    base_table: {database: MUSIC, schema: main, table: singer}
    dimensions:
      - name: artist_name
        expr: name
        synonyms: [stage name]
        description: The name the artist performs under.
      - name: nationality
        expr: country
    facts:
      - name: artist_id
        expr: singer_id
  - name: gigs
    base_table: {database: MUSIC, schema: main, table: performs}
    dimensions:
      - name: artist_ref
        expr: artist
relationships:
  - name: gig_artist
    left_table: gigs
    right_table: artists
    relationship_columns:
      - {left_column: artist_ref, right_column: artist_id}
verified_queries:
  - name: french artists
    question: Which artists are French?
    sql: SELECT artist_name FROM __artists WHERE nationality = 'France'
    verified_by: Rosa
    verified_at: 1714000000
"""


def test_cortex_semantic_model(music, store: Path, tmp_path: Path) -> None:
    file = tmp_path / "model.yaml"
    file.write_text(CORTEX)
    report = learn(music, file)
    assert report.added == 1 and report.rejected == 0
    held = read_store(store)
    (query,) = held.queries
    # logical names rewritten onto the base table and the columns' expressions: it runs on the database
    assert "singer" in query.sql and "country" in query.sql and "__artists" not in query.sql
    assert query.verified_by == "Rosa" and query.verified_at == "2024-04-24"
    assert sorted(music.execute(query.sql).rows) == [("Justin Brown",), ("Rose White",)]
    note = held.schema_notes.tables["main.singer"]
    assert note.synonyms == ["performers", "vocalists"] and "sing" in (note.description or "")
    assert note.columns["name"].synonyms == ["artist_name", "stage name"]
    joins = {(j.left, j.right): j.by for j in held.facts.joins}
    assert joins[("main.performs.artist", "main.singer.singer_id")] == {"model.yaml relationships": 1}


def test_document_and_query_log(music, store: Path, tmp_path: Path) -> None:
    doc = tmp_path / "Glossary.md"
    doc.write_text("# Glossary\n\nA *headliner* is the singer who performs first at a concert.\n")
    log = tmp_path / "queries.sql"
    statement = "SELECT c.concert_name FROM concert c JOIN venue v ON c.venue_code = v.code WHERE v.location = 'Ayr United'"
    log.write_text(f"{statement};\n{statement};\nSELECT * FROM nowhere;\nNOT SQL AT ALL;\n")
    learn(music, doc)
    report = learn(music, log)
    assert report.statements == 3 and report.rejected == 1  # `nowhere` still tells nothing, it is read
    held = read_store(store)
    assert "headliner" in held.documents["Glossary.md"]
    (join,) = [j for j in held.facts.joins if "venue" in j.right]
    assert (join.left, join.right, join.count, join.by) == (
        "main.concert.venue_code",
        "main.venue.code",
        2,
        {"queries.sql": 2},
    )
    assert ("main.venue.location", "Ayr United") in {(x.column, x.value) for x in held.facts.literals}
    # the same log again: its counts are replaced, not added; a grown log counts what it holds now
    learn(music, log)
    assert [j.count for j in read_store(store).facts.joins if "venue" in j.right] == [2]
    log.write_text(f"{statement};\n" * 5)
    learn(music, log)
    assert [j.count for j in read_store(store).facts.joins if "venue" in j.right] == [5]


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("bad.json", '[{"question": "x", "query": "SELECT 1"},', "not valid JSON (line 1"),
        ("bad.jsonl", '{"question": "x", "sql": "SELECT 1"}\n{oops}\n', "line 2 is not JSON"),
        ("bad.yaml", "tables: [\n  - name: x\n", "not valid YAML"),
        ("model.yaml", "just: text\n", "not a Cortex Analyst semantic model"),
        ("notes.docx", "hello", "cannot tell the format"),
        ("empty.sql", "  \n", "no SQL statement"),
    ],
)
def test_a_file_that_cannot_be_read_writes_nothing(
    music, store: Path, tmp_path: Path, name: str, text: str, said: str
) -> None:
    file = tmp_path / name
    file.write_text(text)
    with pytest.raises(InvalidArgument, match=said.replace("(", r"\(")):
        learn(music, file)
    assert not store.exists()


def test_strict_writes_nothing_when_an_item_is_rejected(music, store: Path, tmp_path: Path) -> None:
    file = tmp_path / "pairs.json"
    file.write_text(json.dumps(PAIRS))
    with pytest.raises(
        InvalidArgument, match="3 of the items were rejected and --strict is on: nothing was written"
    ):
        learn(music, file, strict=True)
    assert not (store / "queries.yaml").exists()


def test_a_huge_file_is_refused_with_what_to_do(
    music, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(formats, "MAX_FILE_BYTES", 1000)
    log = tmp_path / "huge.sql"
    log.write_text("SELECT name FROM singer;\n" * 100)
    with pytest.raises(InvalidArgument, match="Split it"):
        learn(music, log)
    assert not store.exists()


def test_the_store_is_plain_reviewable_yaml(music, store: Path, tmp_path: Path) -> None:
    file = tmp_path / "pairs.jsonl"
    file.write_text(
        json.dumps(
            {"question": "Singers by age", "sql": "SELECT name,\n       age\nFROM singer\nORDER BY age"}
        )
        + "\n"
    )
    learn(music, file)
    text = (store / "queries.yaml").read_text()
    assert (
        "sql: |-\n    SELECT name,\n           age\n    FROM singer\n" in text
    )  # SQL as a block: diffs by line
    assert yaml.safe_load(text)["queries"][0]["question"] == "Singers by age"
    assert (store / "README.md").exists() and (store / "facts.yaml").exists()
