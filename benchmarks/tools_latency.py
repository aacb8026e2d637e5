"""Warm latency of the tools (median of 20 calls) on the demo database at a given scale (default
100: a 10M-row fact table) and on a generated 2,000-table catalog; the full stdio round trip of a
trivial tool; the value-index build time for the whole demo database; the characters each tool's
text output used.

    python benchmarks/tools_latency.py [--scale 100] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from flexsql.tools import catalog, query
from flexsql.tools.catalog import DescribeTable, ListTables
from flexsql.tools.engines import SourceRegistry, open_source  # noqa: E402
from flexsql.tools.query import SampleRows
from flexsql.tools.runtime.context import ToolContext  # noqa: E402
from flexsql.tools.search import ranking as search
from flexsql.tools.search.ranking import SearchSchema
from flexsql.tools.values import find as values
from flexsql.tools.values.find import FindValues

TARGETS_MS = {
    "describe_table": 20,
    "search_schema": 50,
    "find_values": 100,
    "sample_rows": 50,
    "stdio list_sources": 5,
}


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    fn()  # warm
    times = []
    out = None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), out


def wide_catalog(directory: Path, tables: int = 2000, columns: int = 15) -> str:
    path = directory / "wide.duckdb"
    con = duckdb.connect(str(path))
    words = [
        "customer",
        "order",
        "invoice",
        "payment",
        "shipment",
        "product",
        "supplier",
        "employee",
        "region",
        "campaign",
        "session",
        "ticket",
        "contract",
        "account",
        "ledger",
        "asset",
    ]
    for i in range(tables):
        schema = f"s{i % 20}"
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        name = f"{words[i % len(words)]}_{words[(i // 16) % len(words)]}_{i}"
        cols = ", ".join(f"{words[(i + c) % len(words)]}_attr_{c} VARCHAR" for c in range(columns))
        con.execute(f"CREATE TABLE {schema}.{name} (id INTEGER, {cols})")
        if i % 50 == 0:
            con.execute(
                f"INSERT INTO {schema}.{name} (id, {words[i % len(words)]}_attr_0) "
                f"SELECT r, 'value ' || r FROM range(100) t(r)"
            )
    con.close()
    return f"duckdb:///{path}"


def stdio_round_trip(url: str, repeat: int) -> float:
    from mcp import Client

    from tests.support.mcp_support import stdio_params

    async def go() -> float:
        async with Client(stdio_params(url)) as client:
            await client.call_tool("list_sources", {})
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                await client.call_tool("list_sources", {})
                times.append((time.perf_counter() - started) * 1000)
            return statistics.median(times)

    return anyio.run(go)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    from flexsql.demo_db.cache import demo_db_path, demo_url

    started = time.perf_counter()
    url = demo_url(args.scale)
    build_s = time.perf_counter() - started
    fact_rows = (
        duckdb.connect(str(demo_db_path(args.scale)), read_only=True)
        .execute("SELECT count(*) FROM order_items")
        .fetchone()[0]
    )
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        demo = ToolContext(sources=SourceRegistry([open_source(url, name="demo")]))
        started = time.perf_counter()
        stats = values.build_value_index(demo, refresh=True)
        index_s = time.perf_counter() - started
        cases: list[tuple[str, str, Callable[[], Any]]] = [
            (
                "describe_table",
                "demo",
                lambda: catalog.describe_table(demo, DescribeTable(table="order_items")),
            ),
            (
                "search_schema",
                "demo",
                lambda: search.search_schema(
                    demo, SearchSchema(query="net revenue by product category in France")
                ),
            ),
            ("find_values", "demo", lambda: values.find_values(demo, FindValues(text="Frnace"))),
            (
                "sample_rows",
                "demo",
                lambda: query.sample_rows(demo, SampleRows(table="order_items", limit=10)),
            ),
            ("list_tables", "demo", lambda: catalog.list_tables(demo, ListTables())),
        ]
        wide = ToolContext(sources=SourceRegistry([open_source(wide_catalog(Path(tmp)), name="wide")]))
        wide_tables = wide.source().catalog().tables
        described, sampled = wide_tables[len(wide_tables) // 2].qualified, wide_tables[0].qualified
        cases += [
            (
                "describe_table",
                "2000 tables",
                lambda: catalog.describe_table(wide, DescribeTable(table=described)),
            ),
            (
                "search_schema",
                "2000 tables",
                lambda: search.search_schema(wide, SearchSchema(query="which supplier invoices were paid")),
            ),
            ("find_values", "2000 tables", lambda: values.find_values(wide, FindValues(text="value 42"))),
            (
                "sample_rows",
                "2000 tables",
                lambda: query.sample_rows(wide, SampleRows(table=sampled, limit=10)),
            ),
            ("list_tables", "2000 tables", lambda: catalog.list_tables(wide, ListTables())),
        ]
        for tool, where, fn in cases:
            ms, out = median_ms(fn, args.repeat)
            rows.append(
                {
                    "tool": tool,
                    "database": where,
                    "median_ms": round(ms, 2),
                    "text_chars": len(out.to_text()),
                    "target_ms": TARGETS_MS.get(tool),
                }
            )
        rows.append(
            {
                "tool": "stdio list_sources",
                "database": "demo",
                "median_ms": round(stdio_round_trip(url, args.repeat), 2),
                "text_chars": None,
                "target_ms": TARGETS_MS["stdio list_sources"],
            }
        )
    print(f"demo scale {args.scale:g}: {fact_rows:,} order_items rows (database ready in {build_s:.1f} s)")
    print(
        f"value index for the whole demo database: {index_s:.1f} s ({stats.model_dump() if hasattr(stats, 'model_dump') else stats})"
    )
    print(f"{'tool':<20}{'database':<14}{'median ms':>10}{'target':>8}{'chars':>8}")
    for r in rows:
        target = f"≤{r['target_ms']}" if r["target_ms"] else ""
        print(f"{r['tool']:<20}{r['database']:<14}{r['median_ms']:>10}{target:>8}{r['text_chars'] or '':>8}")
    out = Path(__file__).parent / "results" / "tools_latency.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {"scale": args.scale, "fact_rows": fact_rows, "value_index_s": round(index_s, 2), "rows": rows},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
