"""Fetching under caps (tools/engines/fetch.py), on every engine: rows, bytes and the count limit;
huge text, BLOB, list, struct and map cells cut at fetch (a DuckDB `list(range)` over millions of rows
is one cell that used to be stored whole, issue 13). The assertions are on the stored cell's size and
its marker, not on time."""

from __future__ import annotations

import json

import duckdb
import pytest

from flexsql.config import LimitsConfig
from flexsql.tools.engines import FetchLimits, SourceRegistry, open_source
from flexsql.tools.engines.fetch import collect, cut_big_cells
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext

ELEMENTS = 2_000_000


@pytest.fixture()
def duck(tmp_path):
    path = tmp_path / "lists.duckdb"
    duckdb.connect(str(path)).close()
    src = open_source(f"duckdb:///{path}", name="lists")
    yield src
    src.close()


def test_a_huge_list_cell_is_cut_to_its_first_elements_with_a_count(duck):
    result = duck.execute(
        f"SELECT 7 AS id, list(range) AS xs FROM range({ELEMENTS})",
        limits=FetchLimits(max_cell_bytes=64 * 1024),
    )
    (row,) = result.rows
    assert row[0] == 7
    cell = row[1]
    assert len(json.dumps(cell)) <= 64 * 1024
    assert cell[:3] == [0, 1, 2]  # the first elements, in order
    kept = len(cell) - 1
    assert cell[-1] == f"… {ELEMENTS - kept} more elements cut"
    assert result.cells_cut == 1 and "1 cell(s) over max_cell_bytes=65536 cut" in result.truncated_reason
    assert not result.truncated  # the one row is there: only its cell is a prefix


def test_run_query_stores_a_cut_list_under_store_cell_kb(duck):
    ctx = ToolContext(sources=SourceRegistry([duck]), limits=LimitsConfig(store_cell_kb=16))
    out = run_query(
        ctx, RunQuery(sql=f"SELECT list(range) AS xs, {{'k': list(range)}} AS st FROM range({ELEMENTS})")
    )
    stored = ctx.results.get(out.result_id)
    for cell in stored.rows[0]:
        assert len(json.dumps(cell)) <= 16 * 1024
    assert stored.rows[0][0][-1].endswith("more elements cut")
    assert stored.rows[0][1]["k"][-1].endswith("more elements cut")


def test_maps_and_nested_lists_are_cut_inside_and_small_ones_untouched():
    small = ([1, 2, None], {"a": "x"})
    big_map = {f"k{i}": i for i in range(100_000)}
    nested = [["y" * 5000] * 1000]
    rows = [small, (big_map, nested)]
    assert cut_big_cells(rows, 50_000) == 2
    assert rows[0] == small
    cut_map, cut_nested = rows[1]
    assert len(json.dumps(cut_map, ensure_ascii=False)) <= 50_000
    assert cut_map["k0"] == 0 and cut_map["…"] == f"{100_000 - (len(cut_map) - 1)} more keys cut"
    assert len(cut_nested) == 1 and cut_nested[0][-1].endswith("more elements cut")
    assert len(json.dumps(cut_nested)) <= 50_000


def test_fetch_loop_cuts_huge_cells_and_keeps_the_row():
    rows, counted, more, reason = collect(
        iter([[(1, "x" * 5_000_000, b"\0" * 3_000_000)]]),
        FetchLimits(max_rows=10, max_bytes=2_000_000, max_cell_bytes=100_000),
    )
    assert counted == 1 and len(rows) == 1
    assert len(rows[0][1]) <= 100_000 and len(rows[0][2]) <= 100_000
    assert reason is not None and reason.cells == 2 and reason.rows is None  # both cells cut, no row dropped


def test_fetch_caps_rows_and_reports_true_total(shop):
    result = shop.execute("SELECT * FROM orders", limits=FetchLimits(max_rows=3, count_limit=100))
    assert len(result.rows) == 3
    assert result.total_rows == 7 and result.truncated and not result.total_is_lower_bound


def test_fetch_reports_lower_bound_past_count_limit(shop):
    result = shop.execute("SELECT * FROM orders", limits=FetchLimits(max_rows=2, count_limit=5))
    assert result.total_rows == 5 and result.total_is_lower_bound and result.truncated


def test_fetch_caps_bytes(shop):
    result = shop.execute("SELECT * FROM customers", limits=FetchLimits(max_rows=100, max_bytes=60))
    assert 0 < len(result.rows) < 5
    assert result.truncated and "max_bytes" in (result.truncated_reason or "")


@pytest.mark.parametrize("flagged", [False, True], ids=["plain", "with-engine-flags"])
def test_counting_past_the_kept_rows_holds_one_batch_at_a_time(tmp_path, flagged):
    """Rows fetched only to be counted are freed before the next batch comes: Python's memory while 10
    rows are kept and 100,000 counted stays about one batch (2,048 rows of ~1 KB), not two (the driver's
    batch was still referenced while the next was built), also when the engine adds flag columns (a
    DATE's infinity flag) that are dropped from each row."""
    import sys
    import tracemalloc

    path = tmp_path / "t.duckdb"
    extra = ", DATE '2020-01-01' + CAST(i % 1000 AS INTEGER) AS d" if flagged else ""
    with duckdb.connect(str(path)) as conn:
        conn.execute(
            f"CREATE TABLE t AS SELECT i, repeat('x', 1000) || i AS s{extra} FROM range(100000) r(i)"
        )
    src = open_source(f"duckdb:///{path}", name="t")
    try:
        src.execute("SELECT * FROM t LIMIT 10")  # catalog and guard loaded first
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = src.execute("SELECT * FROM t", limits=FetchLimits(max_rows=10, count_limit=1_000_000))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(result.rows) == 10 and result.total_rows == 100_000
        row = result.rows[5]
        batch = 2048 * (sys.getsizeof(row) + sum(sys.getsizeof(cell) for cell in row))
        assert peak - before <= 1.5 * batch, (peak - before) / batch
    finally:
        src.close()
