"""Big cells are cut by the engine, before Python builds them: a one-row `list(range)` of millions of
elements or a PostgreSQL `string_agg` of a gigabyte used to be materialised whole in Python and only
then cut to [limits] store_cell_kb. Each engine declares how it cuts a value of each type in SQL
(tools/engines/engine.py `Engine.cap_cell`), so the driver hands over at most store_cell_kb + 1
characters (or bytes) of any cell; the fetch's own cut then marks and counts it as before."""

from __future__ import annotations

from typing import Any

import pytest

from flexsql.config import LimitsConfig
from flexsql.tools.engines import SourceRegistry
from flexsql.tools.query import RunQuery, run_query
from flexsql.tools.runtime.context import ToolContext
from tests.support.engines import engine_params

CAP = 1024  # store_cell_kb=1

BIG = {
    "duckdb": [
        "SELECT repeat('x', 100000) AS big",
        "SELECT list(i) AS big FROM range(100000) t(i)",
        "SELECT encode(repeat('x', 100000)) AS big",
        "SELECT {'a': repeat('x', 100000), 'b': 1} AS big",
        "SELECT MAP {'k': repeat('x', 100000)} AS big",
    ],
    "postgres": [
        "SELECT repeat('x', 100000) AS big",
        "SELECT string_agg('x', '') AS big FROM generate_series(1, 100000)",
        "SELECT decode(repeat('ab', 100000), 'hex') AS big",
        "SELECT array_agg(i) AS big FROM generate_series(1, 100000) i",
        "SELECT jsonb_agg(i) AS big FROM generate_series(1, 100000) i",
        "SELECT repeat('x', 100000)::varchar AS big",
    ],
    "sqlite": [
        "SELECT printf('%.100000c', 'x') AS big",
        "SELECT zeroblob(100000) AS big",
    ],
    "snowflake": ["SELECT REPEAT('x', 100000) AS big"],
}


def _size(value: Any) -> int:
    """The largest piece of a cell: a text's or binary's length, a list's element count, in depth."""
    if isinstance(value, str | bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, list | tuple):
        return max([len(value), *(_size(v) for v in value)])
    if isinstance(value, dict):
        return max([len(value), *(_size(v) for v in value.values())])
    return 0


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch, engine: str) -> list[int]:
    """The size of every cell the engine's driver handed to Python (what collect() received)."""
    import importlib

    module = importlib.import_module(f"flexsql.tools.engines.{engine}_source")
    real = module.collect
    seen: list[int] = []

    def spy(batches: Any, limits: Any) -> Any:
        def watched() -> Any:
            for batch in batches:
                seen.extend(_size(v) for row in batch for v in row)
                yield batch

        return real(watched(), limits)

    monkeypatch.setattr(module, "collect", spy)
    return seen


@pytest.mark.parametrize("engine", engine_params(), indirect=True)
def test_the_engine_cuts_big_cells_before_python_builds_them(shop, engine, handed):
    ctx = ToolContext(sources=SourceRegistry([shop]), limits=LimitsConfig(store_cell_kb=1))
    for sql in BIG[engine]:
        handed.clear()
        out = run_query(ctx, RunQuery(sql=sql))
        assert handed and max(handed) <= CAP + 1, (sql, max(handed))
        assert out.cells_cut == 1 and out.row_count == 1, (sql, out.to_text())
        kept = ctx.results.get(out.result_id).rows[0][0]
        assert 0 < _size(kept) <= CAP, sql
        assert "cells cut: 1" in out.to_text()


@pytest.mark.parametrize("engine", engine_params(), indirect=True)
def test_small_cells_and_order_are_untouched(shop, engine, handed):
    """The cut changes nothing else: values under the cap come whole, with their types, in the
    query's order, and duplicate column names survive."""
    ctx = ToolContext(sources=SourceRegistry([shop]), limits=LimitsConfig(store_cell_kb=1))
    out = run_query(
        ctx,
        RunQuery(
            sql="SELECT o.order_id, o.status, o.status, c.name FROM orders o "
            "JOIN customers c ON c.customer_id = o.customer_id ORDER BY o.order_id DESC"
        ),
    )
    names = [c.lower() for c in out.columns]
    # fakesnow (DuckDB underneath) renames a repeated name of a subquery, as before the cut
    assert names == ["order_id", "status", "status_1" if engine == "snowflake" else "status", "name"]
    assert [r[0] for r in out.rows] == [106, 105, 104, 103, 102, 101, 100]
    assert out.rows[0][1:] == ["S", "S", "Bob Stone"] and out.cells_cut == 0


@pytest.mark.parametrize("engine", engine_params(), indirect=True)
def test_an_exact_fetch_cuts_nothing(shop, engine):
    """The scorers ask for whole values (max_cell_bytes=2**62): no engine cut, on any engine."""
    from flexsql.tools.engines import FetchLimits

    sql = BIG[engine][0]
    result = shop.execute(sql, limits=FetchLimits(max_cell_bytes=2**62, max_bytes=2**62))
    assert result.cells_cut == 0 and len(result.rows[0][0]) == 100000
