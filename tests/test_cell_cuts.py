"""A cell too big for the store is kept as a prefix, and every reader is told so as such: rows that were
dropped and values that were cut are different news ('rows 1-20 of 4,000' against 'this value is its
first KiB'). run_query, fetch_rows, compare_results and run_python's flexsql.sql() on a real DuckDB file."""

from __future__ import annotations

import duckdb
import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import InvalidArgument
from flexsql.tools.compare import CompareResults, compare_results
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.python_tool import RunPython, run_python
from flexsql.tools.query import FetchRows, RunQuery, fetch_rows, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.render import TextBudget

LONG = 5000  # characters of the long value: over a 1 KiB cell cap, far under the default 1 MiB


@pytest.fixture()
def notes(tmp_path):
    path = tmp_path / "notes.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(
        f"CREATE TABLE notes AS SELECT i AS id, CASE WHEN i = 2 THEN repeat('x', {LONG}) ELSE 'short' END "
        "AS body FROM range(1, 4) t(i)"
    )
    conn.close()
    source = open_source(f"duckdb:///{path}", name="notes")
    yield source
    source.close()


def _ctx(source, **limits) -> ToolContext:
    return ToolContext(sources=SourceRegistry([source]), limits=LimitsConfig(**limits))


def test_run_query_says_a_value_was_cut_and_not_that_rows_were_dropped(notes):
    out = run_query(_ctx(notes, store_cell_kb=1), RunQuery(sql="SELECT id, body FROM notes ORDER BY id"))
    assert out.total_rows == 3 and out.row_count == 3 and not out.truncated
    assert out.cells_cut == 1
    cut = out.rows[1][1]
    assert len(cut) <= 1024 and cut.endswith("…") and cut.startswith("xxx")
    text = out.to_text()
    assert "cells cut: 1 value(s)" in text and "truncated: true" not in text


def test_under_the_default_cap_the_same_value_is_whole(notes):
    out = run_query(_ctx(notes), RunQuery(sql="SELECT body FROM notes WHERE id = 2"))
    assert out.cells_cut == 0 and out.rows[0][0] == "x" * LONG
    assert "cells cut" not in out.to_text()


def test_fetch_rows_of_a_cut_result_does_not_claim_rows_were_dropped(notes):
    ctx = _ctx(notes, store_cell_kb=1)
    first = run_query(ctx, RunQuery(sql="SELECT id, body FROM notes ORDER BY id", max_rows=1))
    assert first.truncated and first.cells_cut == 1  # rows 2-3 not shown yet: that is truncation
    rest = fetch_rows(ctx, FetchRows(result_id=first.result_id, offset=1, limit=10))
    assert rest.row_count == 2 and not rest.truncated and rest.hint is None
    assert "cells cut: 1" in rest.to_text()


def test_compare_results_refuses_cut_values_and_says_why(notes):
    ctx = _ctx(notes, store_cell_kb=1)
    a = run_query(ctx, RunQuery(sql="SELECT body FROM notes"))
    b = run_query(ctx, RunQuery(sql="SELECT body FROM notes ORDER BY id DESC"))
    with pytest.raises(InvalidArgument, match="kept only in part.*md5"):
        compare_results(ctx, CompareResults(result_ids=[a.result_id, b.result_id]))
    # positive control: the same comparison without the long value goes through
    c = run_query(ctx, RunQuery(sql="SELECT body FROM notes WHERE id <> 2"))
    d = run_query(ctx, RunQuery(sql="SELECT body FROM notes WHERE id <> 2 ORDER BY id DESC"))
    assert compare_results(ctx, CompareResults(result_ids=[c.result_id, d.result_id])).groups == [
        [c.result_id, d.result_id]
    ]


def test_flexsql_sql_in_python_follows_store_cell_kb_and_says_values_were_cut(notes):
    code = (
        "df = flexsql.sql('SELECT body FROM notes WHERE id = 2')\n"
        "print(len(df.body[0]), df.attrs['cells_cut'], df.attrs['truncated'])"
    )
    cut = run_python(_ctx(notes, store_cell_kb=1), RunPython(code=code))
    assert cut.ok, cut.error
    length, cells, truncated = cut.stdout.split()
    assert int(length) <= 1024 and cells == "1" and truncated == "False"
    assert "too big to return whole" in cut.stderr and "rows were returned" not in cut.stderr
    whole = run_python(_ctx(notes), RunPython(code=code))
    assert whole.ok and whole.stdout.split() == [str(LONG), "0", "False"] and whole.stderr == ""


def test_on_a_result_of_hundreds_of_columns_both_notes_survive_the_text_cap(tmp_path):
    path = tmp_path / "wide.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(
        "CREATE TABLE wide AS SELECT repeat('w', 3000) AS body, "
        + ", ".join(f"i * {k} AS column_number_{k}" for k in range(300))
        + " FROM range(50) t(i)"
    )
    conn.close()
    source = open_source(f"duckdb:///{path}", name="wide")
    try:
        out = run_query(_ctx(source, store_cell_kb=1), RunQuery(sql="SELECT * FROM wide"))
        text = out.to_text(TextBudget(max_chars=4000))
        assert len(text) <= 4000
        assert out.truncated and "truncated: true — rows 1-" in text and "fetch_rows(" in text
        assert "cells cut: 50 value(s)" in text
        header = text.splitlines()[1]
        assert header.startswith("body | column_number_0") and header.endswith("…")  # 300 names do not fit
    finally:
        source.close()
