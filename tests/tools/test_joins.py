"""find_join_path (tools/joins.py): joins inferred from names through intermediate tables, disconnected
tables reported, inference following a catalog refresh."""

from __future__ import annotations

from flexsql.tools import joins, query
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.joins import FindJoinPath
from flexsql.tools.query import RunQuery
from flexsql.tools.runtime.context import ToolContext


def test_join_path_infers_from_names_and_goes_through_intermediate_tables(warehouse):
    path = joins.find_join_path(warehouse, FindJoinPath(tables=["invoice_line", "customer"]))
    conditions = [j.condition() for j in path.joins]
    assert path.connected and path.via == ["main.invoice"]
    assert any("invoice_id" in c for c in conditions) and any("customer_id" in c for c in conditions)
    assert all(j.kind == "inferred" for j in path.joins) and "check them" in (path.note or "")
    # the snippet runs
    result = query.run_query(warehouse, RunQuery(sql=f"SELECT count(*) {path.sql}"))
    assert result.rows == [[2]]


def test_join_path_reports_disconnected_tables(warehouse):
    path = joins.find_join_path(warehouse, FindJoinPath(tables=["customer", "analytics.ga_sessions_summary"]))
    assert not path.connected and "no join path" in path.to_text()


def test_join_inference_follows_a_catalog_refresh(tmp_path):
    import sqlite3

    from flexsql.tools.joins import find_join_path
    from tests.support.engines import make_sqlite

    url = make_sqlite(tmp_path)
    ctx = ToolContext(sources=SourceRegistry([open_source(url, name="shop")]))
    before = find_join_path(ctx, FindJoinPath(tables=["orders", "customers"]))
    assert before.connected
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    conn.execute(
        "CREATE TABLE refunds (refund_id INTEGER PRIMARY KEY, order_id INTEGER REFERENCES orders(order_id))"
    )
    conn.commit()
    conn.close()
    ctx.source().catalog(refresh=True)
    after = find_join_path(ctx, FindJoinPath(tables=["refunds", "customers"]))
    assert after.connected and "orders" in " ".join(after.via), after
