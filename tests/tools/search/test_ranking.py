"""search_schema (tools/search/ranking.py) on a generated 300-table catalog (DuckDB, several schemas),
on a warehouse-like catalog and on the shop database of every engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexsql.errors import InvalidArgument
from flexsql.tools.engines import SourceRegistry
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.ranking import SearchSchema, search_schema
from flexsql.tools.toolbox import TOOLS
from flexsql.tools.values import index as vi
from flexsql.tools.values.find import build_value_index


def _names(result) -> list[str]:
    return [t.table for t in result.tables]


# -- ranking on a large catalog --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "first", "because"),
    [
        ("employee salary by department", "hr.employees", "salary"),
        ("stock item quantity", "inventory.stockItems", "quantity"),
        ("customer address", "sales.customers", "address"),
        ("general ledger postings", "finance.ledger_entries", "comment mentions"),
        ("concert themes", "music.concert", "concert"),
    ],
)
def test_right_table_first_with_reason(big: ToolContext, query: str, first: str, because: str) -> None:
    result = search_schema(big, SearchSchema(query=query, limit=5))
    assert _names(result)[0] == first
    assert because in " ".join(result.tables[0].why)
    assert result.tables_matched > 5 and result.truncated
    text = result.to_text()
    assert text.splitlines()[1].startswith(f"1. {first}") and "truncated: true" in text


def test_columns_are_ranked_with_reasons(big: ToolContext) -> None:
    result = search_schema(big, SearchSchema(query="customer address"))
    top = result.columns[0]
    assert (top.table, top.column) == ("sales.customers", "custAddr")
    assert "name matches 'customer', 'address'" in top.why
    qty = search_schema(big, SearchSchema(query="unit quantity of stock items")).columns[0]
    assert (qty.table, qty.column) == ("inventory.stockItems", "unitQty")


def test_value_hits_link_demonyms_to_stored_values(big: ToolContext) -> None:
    before = search_schema(big, SearchSchema(query="Which singers are French?"))
    assert before.value_index == "not built" and "value index not built" in before.to_text()
    assert not vi.index_path(big.source()).exists()  # searching never scans or builds
    build_value_index(big)
    after = search_schema(big, SearchSchema(query="Which singers are French?"))
    assert after.value_index == "used"
    assert _names(after)[0] == "music.singer"
    assert "column country holds value 'France' (approximate: for 'French')" in after.tables[0].why
    col = after.columns[0]
    assert (col.table, col.column) == ("music.singer", "country")
    assert "holds value 'France' (approximate: for 'French')" in col.why
    # a value alone is enough to find the table holding it
    spain = search_schema(big, SearchSchema(query="Spain"))
    assert _names(spain)[0] == "sports.athletes" and "holds value 'Spain'" in spain.tables[0].why[0]


def test_foreign_key_neighbours_join_the_hits(big: ToolContext) -> None:
    result = search_schema(big, SearchSchema(query="singers and the concerts they sang at", limit=5))
    names = _names(result)
    assert {"music.singer", "music.concert"} <= set(names[:2])
    assert "music.lineup" in names[:4]
    lineup = next(t for t in result.tables if t.table == "music.lineup")
    assert any(w.startswith("FK neighbour of") for w in lineup.why)


def test_tables_of_one_schema_reinforce_each_other(big: ToolContext) -> None:
    names = _names(search_schema(big, SearchSchema(query="singer performance rating")))
    assert names.index("music.performance") < names.index("sports.performance")
    names = _names(search_schema(big, SearchSchema(query="athlete performance score")))
    assert names.index("sports.performance") < names.index("music.performance")


@pytest.mark.parametrize("engine", ["duckdb"])
def test_bad_arguments_are_clear_errors(shop) -> None:
    ctx = ToolContext(sources=SourceRegistry([shop]))
    with pytest.raises(InvalidArgument, match="query is required"):
        search_schema(ctx, SearchSchema(query="   "))
    with pytest.raises(InvalidArgument, match="limit=0 is out of range: use a value from 1 to 100"):
        TOOLS.call(ctx, "search_schema", {"query": "customers", "limit": 0})
    with pytest.raises(InvalidArgument, match="limit"):
        TOOLS.call(ctx, "search_schema", {"query": "customers", "limit": 1000})
    with pytest.raises(InvalidArgument, match="query takes at most 2000 characters"):
        TOOLS.call(ctx, "search_schema", {"query": "x" * 5000})
    assert search_schema(ctx, SearchSchema(query="zebra unicorn")).tables == []


# -- every engine -----------------------------------------------------------------------------------------


def test_search_on_every_engine(shop) -> None:
    ctx = ToolContext(sources=SourceRegistry([shop]))
    orders = search_schema(ctx, SearchSchema(query="order status and date"))
    assert _names(orders)[0].split(".")[-1].lower() == "orders"
    assert {c.column.lower() for c in orders.columns[:2]} == {"status", "order_date"}
    build_value_index(ctx)
    french = search_schema(ctx, SearchSchema(query="French customers"))
    top = french.tables[0]
    assert top.table.split(".")[-1].lower() == "customers"
    assert any("holds value 'France'" in w for w in top.why)


def test_text_output_is_compact(big: ToolContext, tmp_path: Path) -> None:
    result = search_schema(big, SearchSchema(query="employee salary by department", limit=3))
    text = result.to_text()
    assert len(text) < 1200
    assert text.count("\n") <= 1 + 3 + 1 + 3 + 1


def test_distinct_concepts_fill_the_result(wh: ToolContext) -> None:
    names = _names(
        search_schema(wh, SearchSchema(query="customers, their orders and the suppliers", limit=3))
    )
    assert set(names) == {"crm.customers", "crm.orders", "crm.suppliers"}
