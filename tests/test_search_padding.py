"""search_schema ranks tables with evidence of their own first, and a table whose only link to the
query is its schema says so plainly (keeping such tables is measured: dropping them cost 0.04
all-gold@10 on Spider 2.0-Snow, where the tables a question needs sit together in one schema)."""

from __future__ import annotations

from pathlib import Path

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.explain import SCHEMA_FILLER
from flexsql.tools.search.ranking import SearchSchema, search_schema


def test_schema_only_hits_rank_last_and_say_so(tmp_path: Path) -> None:
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
        result = search_schema(
            ToolContext(sources=SourceRegistry([source])), SearchSchema(query="invoice totals", limit=10)
        )
    finally:
        source.close()
    names = [hit.table.split(".")[-1] for hit in result.tables]
    assert set(names[:2]) == {"invoices", "invoice_lines"}
    filler = [SCHEMA_FILLER.format(schema="sales")]
    weak = [i for i, hit in enumerate(result.tables) if hit.why == filler]
    strong = [i for i, hit in enumerate(result.tables) if hit.why != filler]
    assert not weak or min(weak) > max(strong)  # never ahead of a table with evidence of its own
    assert "employees" not in names  # another schema: no evidence at all
