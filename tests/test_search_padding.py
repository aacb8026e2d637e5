"""search_schema returns only tables with evidence of their own: a table whose only link to the
query is that other tables of its schema matched is padding, not a hit (issue 13)."""

from __future__ import annotations

from pathlib import Path

from flexsql.tools.context import ToolContext
from flexsql.tools.search import SCHEMA_FILLER, search_schema
from flexsql.tools.sources import SourceRegistry, open_source


def test_no_hit_is_padding(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "w.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA sales")
    con.execute("CREATE SCHEMA hr")
    con.execute("CREATE TABLE sales.invoices (invoice_id INTEGER, total DECIMAL(10,2))")
    con.execute("CREATE TABLE sales.invoice_lines (invoice_id INTEGER, sku VARCHAR)")
    for name in ("warehouses", "carriers", "regions", "currencies", "calendar", "suppliers"):
        con.execute(f"CREATE TABLE sales.{name} (id INTEGER, label VARCHAR)")
    con.execute("CREATE TABLE hr.employees (employee_id INTEGER, full_name VARCHAR)")
    con.close()
    source = open_source(f"duckdb:///{path}", name="w")
    try:
        result = search_schema(ToolContext(sources=SourceRegistry([source])), "invoice totals", limit=10)
    finally:
        source.close()
    names = [hit.table.split(".")[-1] for hit in result.tables]
    assert names[:2] == ["invoices", "invoice_lines"] or set(names[:2]) == {"invoices", "invoice_lines"}
    filler = {SCHEMA_FILLER.format(schema="sales")}
    assert all(set(hit.why) != filler for hit in result.tables), [(h.table, h.why) for h in result.tables]
    assert "warehouses" not in names and "calendar" not in names
