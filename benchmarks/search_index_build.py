"""search_schema's first call on very wide catalogs: 60 tables x 3,000 columns (180,000 columns).

Two catalogs of the same size, generated into DuckDB files: `shared`, where every table has the same
column names (shards, twins and standard columns make warehouses repeat names), and `distinct`, where
no two columns share a name: the baseline, in the same run, for what repeating names saves. Reported:
catalog load, the index build plus first query (cold), and a later query (warm, median of 5), with the
twin re-rank at work on the shared catalog.

    python benchmarks/search_index_build.py [--tables 60] [--columns 3000]

Prints a table and writes benchmarks/results/search_index_build.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.search.ranking import SearchSchema, search_schema

HERE = Path(__file__).resolve().parent


def generate(path: Path, tables: int, columns: int, shared: bool) -> None:
    conn = duckdb.connect(str(path))
    for t in range(tables):
        names = (f"metric_{i}" if shared else f"metric_{t}_{i}" for i in range(columns))
        # letters, not digits: tables differing only in digits are one shard family and would be one entry
        tag = "".join(chr(97 + (t // 26**k) % 26) for k in range(3))
        conn.execute(
            f"CREATE TABLE sales_region_{tag}_report ({', '.join(f'{n} DOUBLE' for n in names)}, "
            "region_note VARCHAR)"
        )
    conn.close()


def measure(path: Path) -> dict[str, float]:
    source = open_source(f"duckdb:///{path}", name="wide")
    try:
        started = time.perf_counter()
        catalog = source.catalog()
        load = time.perf_counter() - started
        ctx = ToolContext(sources=SourceRegistry([source]))
        started = time.perf_counter()
        search_schema(ctx, SearchSchema(query="sales report metric by region", limit=20))
        cold = time.perf_counter() - started
        warm = []
        for _ in range(5):
            started = time.perf_counter()
            search_schema(ctx, SearchSchema(query="region note of the sales report", limit=20))
            warm.append(time.perf_counter() - started)
        return {
            "columns": sum(len(t.columns) for t in catalog.tables),
            "catalog_s": round(load, 3),
            "cold_first_call_s": round(cold, 3),
            "warm_ms": round(statistics.median(warm) * 1000, 1),
        }
    finally:
        source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=60)
    parser.add_argument("--columns", type=int, default=3000)
    args = parser.parse_args()
    report: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("distinct", "shared"):
            path = Path(tmp) / f"{kind}.duckdb"
            generate(path, args.tables, args.columns, shared=kind == "shared")
            report[kind] = measure(path)
    print(f"{'catalog':<10} {'columns':>8} | {'catalog s':>9} {'cold s':>7} {'warm ms':>8}")
    for kind, r in report.items():
        print(
            f"{kind:<10} {r['columns']:>8} | {r['catalog_s']:>9} {r['cold_first_call_s']:>7} {r['warm_ms']:>8}"
        )
    ratio = report["distinct"]["cold_first_call_s"] / max(report["shared"]["cold_first_call_s"], 1e-9)
    print(f"cold first call, shared names vs distinct: {ratio:.1f}x faster")
    out = HERE / "results" / "search_index_build.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"tables": args.tables, "columns_per_table": args.columns, **report}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
