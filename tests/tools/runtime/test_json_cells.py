"""JSON cells a model can read, on every engine through a real MCP client.

- Issue 27, item 4: a JSON cell was shown as its first 200 characters; with keys sorted, every `ITEMS`
  cell ended at `"item_category2":"(not…` and `item_name` was never seen. Now every key and each array's
  length survive, long values are shortened, and the text says so — for JSON columns and for text cells
  that hold JSON, in run_query, sample_rows and fetch_rows.
- Issue 30, item 5: a value nested ~1000+ deep raised RecursionError in rendering (run_query, fetch_rows,
  run_python failed bare; describe_table said "flexsql bug"). It is shown as text.
- Issue 30, item 9: a JSON value over store_cell_kb broke the query ("Malformed JSON at byte 1048577":
  the cut text was cast back to JSON). It is cut as text, as documented.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flexsql.config import Settings
from tests.support.engines import statements_database
from tests.support.mcp_support import tool_caller

pytestmark = pytest.mark.anyio

JSON_TYPE = {"duckdb": "JSON", "sqlite": "TEXT", "postgres": "JSONB", "snowflake": "VARIANT"}
TEXT_TYPE = {"duckdb": "VARCHAR", "sqlite": "TEXT", "postgres": "TEXT", "snowflake": "VARCHAR"}
ITEM = {
    "item_id": "9180753",
    "item_name": "Google Navy Speckled Tee",
    "item_brand": "Google",
    "item_variant": "(not set)",
    **{f"item_category{n}": "(not set)" for n in ("", 2, 3, 4, 5)},
    "price_in_usd": 24.0,
    "quantity": 1,
    "item_revenue_in_usd": 24.0,
    "coupon": "(not set)",
    "affiliation": "(not set)",
    "location_id": "(not set)",
    "item_list_id": "(not set)",
    "item_list_name": "(not set)",
    "promotion_id": "(not set)",
    "promotion_name": "(not set)",
    "creative_name": "(not set)",
    "creative_slot": "(not set)",
    "item_refund": None,
}
ITEMS = [dict(sorted(ITEM.items())) for _ in range(3)]  # sorted, as Snowflake hands VARIANTs over
DEPTH = 1600  # past Python's recursion limit, within every engine's JSON parser
BIG = 3000  # characters of one JSON value: over a store_cell_kb of 1


def _literal(engine: str, value: Any, as_json: bool) -> str:
    text = "'" + (value if isinstance(value, str) else json.dumps(value)).replace("'", "''") + "'"
    return f"PARSE_JSON({text})" if engine == "snowflake" and as_json else text


def statements(engine: str, prefix: str = "") -> list[str]:
    j, t = JSON_TYPE[engine], TEXT_TYPE[engine]
    deep = "[" * DEPTH + "]" * DEPTH
    big = {"note": "x" * BIG}
    rows = [
        (1, ITEMS, json.dumps(ITEMS), {"a": 1}, "plain"),
        (2, [], "[]", {"b": 2}, deep),
        (3, big, json.dumps(big), {"c": 3}, "plain"),
    ]
    out = [f"CREATE TABLE {prefix}purchases (id INTEGER, items {j}, items_text {t}, doc {j}, deep_text {t})"]
    for row_id, items, text, doc, deep_text in rows:
        doc_value = deep if engine == "postgres" and row_id == 2 else doc
        values = [
            str(row_id),
            _literal(engine, items, True),
            _literal(engine, text, False),
            _literal(engine, doc_value, True),
            _literal(engine, deep_text, False),
        ]
        verb = "SELECT" if engine == "snowflake" else "VALUES ("
        out.append(
            f"INSERT INTO {prefix}purchases {verb} {', '.join(values)}{'' if engine == 'snowflake' else ')'}"
        )
    return out


@contextlib.contextmanager
def purchases_url(engine: str, directory: Path) -> Iterator[str]:
    with statements_database(engine, directory, "p", statements, snowflake=("PJ_", "S")) as url:
        yield url


@pytest.fixture
def purchases(engine, tmp_path):
    with purchases_url(engine, tmp_path) as url:
        yield url


def _row(text: str, row_id: int) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"{row_id} | "))


async def test_json_cells_keep_every_key_and_the_array_length(purchases):
    async with tool_caller(purchases) as call:
        shown = await call("run_query", sql="SELECT id, items, items_text FROM purchases ORDER BY id")
        cells = _row(shown, 1).split(" | ")[1:]
        assert len(cells) == 2
        for cell in cells:  # the JSON column and the text column holding JSON alike
            for key in ITEM:
                assert f'"{key}":' in cell, (key, cell)
            assert cell.endswith(",…2 more]"), cell  # the array's length survives
            assert "Google Navy Speckled Tee" in cell or "Google Navy" in cell
        assert "note: nested cells shortened keeping every key" in shown
        sampled = await call("sample_rows", table="purchases", columns=["id", "items"], where="id = 1")
        assert '"item_name":' in _row(sampled, 1) and ",…2 more]" in _row(sampled, 1)
        result_id = shown.split(":", 1)[0]
        fetched = await call("fetch_rows", result_id=result_id, offset=0, limit=1)
        assert '"item_name":' in _row(fetched, 1) and "nested cells shortened" in fetched


async def test_deeply_nested_json_is_shown_as_text(purchases, engine):
    async with tool_caller(purchases) as call:
        shown = await call("run_query", sql="SELECT id, doc, deep_text FROM purchases ORDER BY id")
        assert _row(shown, 2).split(" | ")[2].startswith("[[[[")
        result_id = shown.split(":", 1)[0]
        assert "[[[[" in await call("fetch_rows", result_id=result_id, offset=1, limit=1)
        described = await call("describe_table", table="purchases")
        assert "deep_text" in described.lower()
        profile = await call("profile_column", table="purchases", column="deep_text")
        assert "3 rows" in profile and "[[[[" in profile, profile
        assert "[[[[" in await call("distinct_values", table="purchases", column="deep_text")
        python = await call("run_python", code="df", result_ids=[result_id])
        assert "[[[[" in python, python


async def test_a_json_value_over_the_cell_cap_is_cut_as_text(purchases):
    settings = Settings(limits={"store_cell_kb": 1})
    async with tool_caller(purchases, settings=settings) as call:
        shown = await call("run_query", sql="SELECT id, items FROM purchases WHERE id = 3")
        cell = _row(shown, 3).split(" | ")[1]
        # the engine cut it and the query ran; the cell is the document's first part, marked
        assert '"note"' in cell and cell.endswith("x…") and "cells cut: 1 value(s)" in shown, shown
