"""run_query and fetch_rows (tools/query.py) as plain functions: previews, totals, the store's row cap,
the text budget, refusals. A cell too big for the store is kept as a prefix, and every reader is told
so as such: rows that were dropped and values that were cut are different news ('rows 1-20 of 4,000'
against 'this value is its first KiB')."""

from __future__ import annotations

import duckdb
import pytest

from flexsql.config import LimitsConfig
from flexsql.errors import FlexSQLError, InvalidArgument, RefusedError
from flexsql.tools import query
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.query import FetchRows, RunQuery, fetch_rows, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.render import TextBudget
from tests.support.cells import LONG
from tests.support.contexts import context


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


def test_refused_is_not_doubled() -> None:
    ctx = context("duckdb://:memory:")
    with pytest.raises(FlexSQLError) as info:
        run_query(ctx, RunQuery(sql="DROP TABLE x"))
    assert "refused: refused" not in str(info.value).lower()


def test_run_query_preview_total_and_fetch(warehouse):
    out = query.run_query(warehouse, RunQuery(sql="SELECT * FROM range(1000) t(i)", max_rows=5))
    assert out.row_count == 5 and out.total_rows == 1000 and out.truncated
    more = query.fetch_rows(warehouse, FetchRows(result_id=out.result_id, offset=995, limit=50))
    assert [r[0] for r in more.rows] == [995, 996, 997, 998, 999] and not more.truncated
    with pytest.raises(InvalidArgument, match="past the end"):
        query.fetch_rows(warehouse, FetchRows(result_id=out.result_id, offset=5000))


def test_run_query_text_stays_within_budget_and_cuts_cells(warehouse):
    out = query.run_query(
        warehouse, RunQuery(sql="SELECT repeat('x', 5000) AS big, i FROM range(500) t(i)", max_rows=500)
    )
    text = out.to_text()
    assert len(text) <= 4000
    assert "…" in text and "truncated: true" in text


def test_run_query_keeps_only_store_rows_and_reports_lower_bound(tmp_path, warehouse):
    small = ToolContext(sources=warehouse.sources, limits=LimitsConfig(store_rows=1000))
    out = query.run_query(small, RunQuery(sql="SELECT * FROM range(5000)", max_rows=10))
    assert out.total_rows == 1001 and out.total_is_lower_bound
    assert "1001+" in out.to_text()


def test_empty_result_is_an_answer_with_a_hint(warehouse):
    out = query.run_query(warehouse, RunQuery(sql="SELECT * FROM customer WHERE name = 'ann'"))
    assert out.total_rows == 0 and "case" in out.to_text()


def test_run_query_refuses_writes(warehouse):
    with pytest.raises(RefusedError, match="INSERT"):
        query.run_query(warehouse, RunQuery(sql="INSERT INTO customer VALUES (3, 'Cy')"))


@pytest.mark.integration  # waits on a real one-second timeout
def test_the_operators_timeout_is_a_ceiling(duck_ctx):
    """A caller's timeout_s=60 does not outlive [limits] query_timeout_s=1: the query is cancelled
    at the operator's limit, and the error names it."""
    import time

    from flexsql.errors import QueryTimeout

    ctx = ToolContext(sources=duck_ctx.sources, limits=LimitsConfig(query_timeout_s=1))
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="server's limit of 1 s"):
        run_query(ctx, RunQuery(sql="SELECT count(*) FROM range(100000000000000)", timeout_s=60))
    assert time.monotonic() - started < 30


def test_a_lowered_timeout_is_noted_in_the_result(duck_ctx):
    ctx = ToolContext(sources=duck_ctx.sources, limits=LimitsConfig(query_timeout_s=3))
    out = run_query(ctx, RunQuery(sql="SELECT 1 AS one", timeout_s=60))
    note = "timeout_s=60 was lowered to the server's limit of 3 s"
    assert note in out.notes and note in out.to_text()
    assert not run_query(ctx, RunQuery(sql="SELECT 1 AS one", timeout_s=2)).notes


def test_hints_name_only_the_tools_the_reader_can_call(notes):
    """An agent stage offers a few tools: an empty result's hint and the 'more rows' pointer name
    only those (a model sent after a tool it lacks wastes a round); MCP clients see them all."""
    ctx = _ctx(notes)
    empty = run_query(ctx, RunQuery(sql="SELECT id FROM notes WHERE body = 'nope'"))
    assert "distinct_values / find_values" in empty.to_text()
    only_values = empty.to_text(TextBudget(tools=frozenset({"run_query", "find_values"})))
    assert "look it up (find_values)" in only_values and "distinct_values" not in only_values
    bare = empty.to_text(TextBudget(tools=frozenset({"run_query"})))
    assert "no rows matched" in bare and "find_values" not in bare and "distinct_values" not in bare
    many = run_query(ctx, RunQuery(sql="SELECT range AS n FROM range(500)"))
    assert "fetch_rows(" in many.to_text(TextBudget(max_chars=600))
    narrowed = many.to_text(TextBudget(max_chars=600, tools=frozenset({"run_query"})))
    assert "truncated: true" in narrowed and "fetch_rows" not in narrowed


def test_an_empty_result_is_explained_by_what_the_query_does(notes):
    """Was: 'check filter literals' for every empty result, also a join of unrelated rows with no filter
    (seen through the relay on flight_4, where the sample rows of two tables did not join)."""
    ctx = _ctx(notes)

    def hint(sql: str) -> str:
        return run_query(ctx, RunQuery(sql=sql)).to_text().splitlines()[-1]

    filtered = hint("SELECT id FROM notes WHERE body = 'nope'")
    assert filtered.startswith("no rows matched the filters") and "find_values" in filtered
    # an empty result over checked literals is an answer, not a mistake: the hint says it stands
    assert "the empty result stands" in filtered
    joined = hint("SELECT a.id FROM notes a JOIN notes b ON a.id = b.id + 10")
    assert "joins matched nothing" in joined and "sample_rows" in joined and "filter" not in joined
    assert hint("SELECT * FROM range(0)") == "no rows: the tables it reads are empty"
