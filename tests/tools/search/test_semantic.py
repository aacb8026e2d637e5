"""Semantic evidence in search_schema (tools/search/semantic.py, rules.fuse_semantic): table and column
texts, their vectors cached on disk and reused, built in the background, and the fusion with the
lexical ranking. A tiny random model (tests/support/embeddings.py) runs the real code paths; where a
test needs meaning, it sets the vectors itself."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search import embeddings as emb
from flexsql.tools.search import semantic
from flexsql.tools.search.index import search_index
from flexsql.tools.search.ranking import SearchSchema, search_schema
from flexsql.tools.search.semantic import CatalogVectors
from tests.support.embeddings import write_tiny_model

SCHOOL = """
CREATE SCHEMA school;
CREATE TABLE school.student (student_id INTEGER, full_name VARCHAR, age INTEGER, class_year INTEGER);
CREATE TABLE school.teacher (teacher_id INTEGER, full_name VARCHAR, subject VARCHAR);
CREATE TABLE school.course (course_id INTEGER, title VARCHAR, teacher_id INTEGER);
COMMENT ON COLUMN school.course.title IS 'the course name';
CREATE TABLE school.stadium (stadium_id INTEGER, capacity INTEGER, city VARCHAR);
"""


@pytest.fixture
def school(tmp_path: Path) -> ToolContext:
    import duckdb

    path = tmp_path / "campus.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(SCHOOL)
    conn.close()
    return ToolContext(sources=SourceRegistry([open_source(f"duckdb:///{path}", name="school")]))


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> emb.MiniLM:
    monkeypatch.setenv(emb.ENV, str(write_tiny_model(tmp_path / "tiny.zip")))
    monkeypatch.setenv("FLEXSQL_CACHE_DIR", str(tmp_path / "cache"))
    semantic._reset_for_tests()
    loaded = emb.model(wait=True)
    assert loaded is not None
    yield loaded
    semantic._reset_for_tests()


def test_texts_say_what_a_table_and_a_column_are(school: ToolContext) -> None:
    tables = {t.name: t for t in school.source(None).catalog().tables}
    assert semantic.table_text(tables["student"]) == (
        "student (school): student id, full name, age, class year"
    )
    assert (
        semantic.table_text(tables["teacher"], "teacher_*")
        == "teacher (school): teacher id, full name, subject"
    )
    assert semantic.column_text("title", "the course name") == "title: the course name"
    assert semantic.column_text("classYear", None) == "class year"


def test_vectors_are_built_once_kept_on_disk_and_reused(
    school: ToolContext, tiny_model: emb.MiniLM, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    index = search_index(school, school.source(None))
    vectors = semantic.attach(index, wait=True, columns=True)
    assert vectors is not None and index.semantic is vectors
    assert vectors.tables.shape == (len(index.tables), 8)
    assert len(vectors.column_row) == len(index.columns)
    # full_name is a column of two tables, teacher_id too: one text, one row each
    assert vectors.columns.shape[0] == len(index.columns) - 2
    store = semantic.store_file(tiny_model)
    assert store.stat().st_mode & 0o777 == 0o600 and store.parent.stat().st_mode & 0o777 == 0o700

    calls: list[int] = []
    real = emb.MiniLM.encode

    def counting(self: emb.MiniLM, texts: list[str], *args: object, **kwargs: object) -> np.ndarray:
        calls.append(len(texts))
        return real(self, texts, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(emb.MiniLM, "encode", counting)
    again = semantic.build_vectors(index, tiny_model, columns=True)
    assert calls == [] and again is not None  # every text came from the store
    assert np.allclose(again.tables, vectors.tables, atol=1e-3)  # float16 on disk


def test_by_default_only_tables_are_encoded(school: ToolContext, tiny_model: emb.MiniLM) -> None:
    """The default fusion weighs the table cosine only: a wide warehouse's columns are not encoded."""
    index = search_index(school, school.source(None))
    assert index.params.semantic_weight > 0 and index.params.semantic_column_weight == 0
    vectors = semantic.attach(index, wait=True)
    assert vectors is not None and vectors.tables.shape == (len(index.tables), 8)
    assert vectors.columns.shape[0] == 0
    table_cos, best_column, column_cos = vectors.similarities(vectors.tables[0])
    assert column_cos is None and not best_column.any() and table_cos.shape == (len(index.tables),)
    result = search_schema(school, SearchSchema(query="teacher subject", limit=3))
    assert result.tables[0].table.endswith(".teacher")


@pytest.mark.parametrize("meant", ["teacher", "student"])
def test_by_default_meaning_orders_tables_the_words_tie(
    school: ToolContext, monkeypatch: pytest.MonkeyPatch, meant: str
) -> None:
    """'full name' is a column of student and teacher alike; the default weights let meaning decide."""
    search_index(school, school.source(None))
    _meaning_points_at(school, meant, monkeypatch)
    result = search_schema(school, SearchSchema(query="full name", limit=3))
    assert result.tables[0].table.endswith(f".{meant}")


def test_only_new_texts_are_encoded_for_another_catalog(
    school: ToolContext, tiny_model: emb.MiniLM, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import duckdb

    semantic.attach(search_index(school, school.source(None)), wait=True, columns=True)
    path = tmp_path / "campus2.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(SCHOOL + "CREATE TABLE school.grades (student_id INTEGER, mark DOUBLE);")
    conn.close()
    other = ToolContext(sources=SourceRegistry([open_source(f"duckdb:///{path}", name="school2")]))
    encoded: list[str] = []
    real = emb.MiniLM.encode

    def counting(self: emb.MiniLM, texts: list[str], *args: object, **kwargs: object) -> np.ndarray:
        encoded.extend(texts)
        return real(self, texts, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(emb.MiniLM, "encode", counting)
    assert semantic.attach(search_index(other, other.source(None)), wait=True, columns=True) is not None
    assert sorted(encoded) == ["grades (school): student id, mark", "mark"]


def _meaning_points_at(school: ToolContext, table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Vectors where the question means `table` (one-hot per table; columns share their table's)."""
    index = search_index(school, school.source(None))
    n = len(index.tables)
    tables = np.eye(n, dtype=np.float32)
    rows = np.array([ti for ti, _ in index.columns], dtype=np.int64)
    starts = np.array([cols[0] for cols in index.table_columns], dtype=np.int64)
    index.semantic = CatalogVectors(tables, tables, rows, starts, np.arange(n, dtype=np.int64))
    target = next(i for i, t in enumerate(index.tables) if t.name == table)
    monkeypatch.setattr(semantic, "question_vector", lambda query, max_tokens=64: tables[target])


def test_meaning_brings_in_a_table_that_shares_no_word(
    school: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "pupils older than twelve"
    index = search_index(school, school.source(None))
    lexical = search_schema(school, SearchSchema(query=query, limit=3))
    assert not any(t.table.endswith(".student") for t in lexical.tables)
    _meaning_points_at(school, "student", monkeypatch)
    index.params = dataclasses.replace(
        index.params, semantic_weight=1.5, semantic_column_weight=1.0, semantic_pool=3
    )
    fused = search_schema(school, SearchSchema(query=query, limit=3))
    assert fused.tables[0].table.endswith(".student")
    assert any(
        w.startswith("close in meaning to the question (cosine: the table 1.00") for w in fused.tables[0].why
    )


def test_words_still_count_beside_meaning(school: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    index = search_index(school, school.source(None))
    _meaning_points_at(school, "stadium", monkeypatch)
    index.params = dataclasses.replace(index.params, semantic_weight=0.5, semantic_column_weight=0.0)
    result = search_schema(school, SearchSchema(query="teacher subject", limit=3))
    assert result.tables[0].table.endswith(".teacher")  # named by the question's words


def test_without_a_model_search_ranks_as_before(school: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(emb.ENV, "off")
    index = search_index(school, school.source(None))
    before = search_schema(school, SearchSchema(query="teacher of a course", limit=4))
    index.params = dataclasses.replace(
        index.params, semantic_weight=1.5, semantic_column_weight=1.0, semantic_pool=20
    )
    after = search_schema(school, SearchSchema(query="teacher of a course", limit=4))
    assert [(t.table, t.score, t.why) for t in after.tables] == [
        (t.table, t.score, t.why) for t in before.tables
    ]
    assert semantic.attach(index) is None and not index.semantic_started


def test_the_first_search_does_not_wait_for_the_vectors(
    school: ToolContext, tiny_model: emb.MiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    gate = threading.Event()
    real = semantic.build_vectors

    def slow(*args: object, **kwargs: object) -> CatalogVectors | None:
        gate.wait(10)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(semantic, "build_vectors", slow)
    index = search_index(school, school.source(None))
    index.params = dataclasses.replace(index.params, semantic_weight=1.5, semantic_column_weight=1.0)
    result = search_schema(school, SearchSchema(query="teacher subject", limit=3))  # returns at once
    assert result.tables[0].table.endswith(".teacher") and index.semantic is None and index.semantic_started
    gate.set()
    assert semantic.attach(index, wait=True) is not None
    fused = search_schema(school, SearchSchema(query="teacher subject", limit=3))
    assert fused.tables and index.semantic is not None


def test_a_long_question_is_encoded_from_its_first_tokens(tiny_model: emb.MiniLM) -> None:
    """Params.semantic_question_tokens: words past the cap do not change the question's vector (the
    tiny model reads 64 tokens at most)."""
    head = "which teachers teach the most courses " * 3
    capped = semantic.question_vector(head + "and then many more words " * 20, max_tokens=16)
    assert capped is not None
    assert np.allclose(capped, tiny_model.encode([head], max_tokens=16)[0])
    whole = semantic.question_vector(head + "and then many more words " * 20, max_tokens=48)
    assert whole is not None and not np.allclose(capped, whole)


def test_a_repeated_search_encodes_its_question_once(
    school: ToolContext, tiny_model: emb.MiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = search_index(school, school.source(None))
    assert semantic.attach(index, wait=True) is not None
    encoded: list[str] = []
    real = emb.MiniLM.encode

    def counting(self: emb.MiniLM, texts: list[str], *args: object, **kwargs: object) -> object:
        encoded.extend(texts)
        return real(self, texts, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(emb.MiniLM, "encode", counting)
    first = search_schema(school, SearchSchema(query="teacher subject", limit=3))
    again = search_schema(school, SearchSchema(query="teacher subject", limit=3))
    assert encoded == ["teacher subject"]
    assert [(t.table, t.score) for t in again.tables] == [(t.table, t.score) for t in first.tables]
    assert any("close in meaning" in w for t in first.tables for w in t.why)


def test_a_first_search_waits_for_table_vectors_the_store_already_has(
    school: ToolContext, tiny_model: emb.MiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later start: every table vector is on disk, so the first search of a new index (a new process,
    a `flexsql call`) loads them and ranks with them instead of without; with an empty store it does
    not wait."""
    fresh = search_index(school, school.source(None))
    assert not semantic.tables_stored(fresh)
    search_schema(school, SearchSchema(query="pupils"))  # starts the build; ranks without vectors
    assert fresh.semantic is None
    assert semantic.attach(fresh, wait=True) is not None
    assert semantic.tables_stored(fresh)

    ranked_with: list[CatalogVectors] = []
    similarities = CatalogVectors.similarities

    def spy(self: CatalogVectors, question: np.ndarray):  # type: ignore[no-untyped-def]
        ranked_with.append(self)
        return similarities(self, question)

    monkeypatch.setattr(CatalogVectors, "similarities", spy)
    school.caches.clear()  # the next process: a new index over the same catalog
    later = ToolContext(sources=school.sources)
    search_schema(later, SearchSchema(query="pupils"))
    index = search_index(later, later.source(None))
    assert index is not fresh and ranked_with == [index.semantic]  # the first search ranked with them
