"""List, struct and map cells are cut at fetch like text and BLOBs: a DuckDB `list(range)` over
millions of rows is one cell that used to be stored whole (issue 13). Real DuckDB files; the
assertions are on the stored cell's size and its marker, not on time."""

from __future__ import annotations

import json

import duckdb
import pytest

from flexsql.config import LimitsConfig
from flexsql.tools.engines import FetchLimits, SourceRegistry, open_source
from flexsql.tools.engines.fetch import cut_big_cells
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
