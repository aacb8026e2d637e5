"""Catalog introspection of a wide DuckDB database: 2,000 tables × 15 columns (generated, with
comments on some tables and columns, primary keys on all, foreign keys on some).

Measures, against the targets of the issue (cold ≤ 3 s, cached ≤ 50 ms):
- cold, in process: a fresh Source (new connection) and its first `catalog()`, several times;
- cold, fresh process: a new Python process opens the source and loads the catalog (the time
  inside the process, and the whole run including interpreter start and imports);
- refresh: `catalog(refresh=True)` on an open source (re-read, no reconnect);
- cached: `catalog()` once loaded (median of 20).

    python benchmarks/catalog.py [--tables 2000] [--columns 15] [--repeat 20]

Prints a table and writes benchmarks/results/catalog.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from flexsql.tools.engines import open_source

TARGET_COLD_S = 3.0
TARGET_CACHED_MS = 50.0
RESULTS = Path(__file__).resolve().parent / "results" / "catalog.json"


def generate(path: Path, tables: int, columns: int) -> None:
    """`tables` tables in 20 schemas, `columns` columns each (id, ref_id, then c2…); every 10th
    table and every 5th column of it commented; every 7th table's ref_id a foreign key to the
    first table of its schema."""
    con = duckdb.connect(str(path))
    con.execute("BEGIN")
    for s in range(20):
        con.execute(f"CREATE SCHEMA s{s}")
    for i in range(tables):
        schema = f"s{i % 20}"
        cols = ", ".join(
            f"c{c}_{'text' if c % 2 else 'num'} {'VARCHAR' if c % 2 else 'DOUBLE'}" for c in range(2, columns)
        )
        fk = f", FOREIGN KEY (ref_id) REFERENCES {schema}.t{i % 20} (id)" if i % 7 == 0 and i >= 20 else ""
        con.execute(f"CREATE TABLE {schema}.t{i} (id INTEGER PRIMARY KEY, ref_id INTEGER, {cols}{fk})")
        if i % 10 == 0:
            con.execute(f"COMMENT ON TABLE {schema}.t{i} IS 'table {i}: generated for the catalog benchmark'")
            for c in range(3, columns, 5):
                kind = "text" if c % 2 else "num"
                con.execute(f"COMMENT ON COLUMN {schema}.t{i}.c{c}_{kind} IS 'column {c} of table {i}'")
    con.execute("COMMIT")
    con.close()


def cold_in_process(url: str, repeat: int) -> tuple[list[float], int, int]:
    times = []
    n_tables = n_columns = 0
    for _ in range(repeat):
        started = time.perf_counter()
        source = open_source(url)
        catalog = source.catalog()
        times.append(time.perf_counter() - started)
        n_tables, n_columns = len(catalog.tables), sum(len(t.columns) for t in catalog.tables)
        source.close()
    return times, n_tables, n_columns


def cold_fresh_process(url: str) -> tuple[float, float]:
    code = (
        "import time, sys\n"
        "t0 = time.perf_counter()\n"
        "from flexsql.tools.engines import open_source\n"
        "t1 = time.perf_counter()\n"
        f"c = open_source({url!r}).catalog()\n"
        "t2 = time.perf_counter()\n"
        "assert len(c.tables) > 0\n"
        "print(t2 - t1)\n"
    )
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    return float(out.stdout.strip().splitlines()[-1]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=2000)
    parser.add_argument("--columns", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide.duckdb"
        started = time.perf_counter()
        generate(path, args.tables, args.columns)
        generate_s = time.perf_counter() - started
        url = f"duckdb:///{path}"

        cold, n_tables, n_columns = cold_in_process(url, 5)
        process_s, process_wall_s = cold_fresh_process(url)

        source = open_source(url)
        source.catalog()
        refresh = []
        for _ in range(5):
            t0 = time.perf_counter()
            source.catalog(refresh=True)
            refresh.append(time.perf_counter() - t0)
        cached = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            source.catalog()
            cached.append((time.perf_counter() - t0) * 1000)
        load_seconds = source.catalog().load_seconds
        source.close()

    rows = [
        ("generate the database", f"{generate_s:.2f} s", "", ""),
        (
            "cold, fresh Source (median of 5)",
            f"{statistics.median(cold):.3f} s",
            f"≤ {TARGET_COLD_S:g} s",
            "ok" if max(cold) <= TARGET_COLD_S else "SLOW",
        ),
        (
            "cold, fresh Source (worst of 5)",
            f"{max(cold):.3f} s",
            f"≤ {TARGET_COLD_S:g} s",
            "ok" if max(cold) <= TARGET_COLD_S else "SLOW",
        ),
        (
            "cold, fresh process (catalog only)",
            f"{process_s:.3f} s",
            f"≤ {TARGET_COLD_S:g} s",
            "ok" if process_s <= TARGET_COLD_S else "SLOW",
        ),
        ("fresh process, whole run (start, imports)", f"{process_wall_s:.3f} s", "", ""),
        ("refresh=True on an open source (median of 5)", f"{statistics.median(refresh):.3f} s", "", ""),
        (
            f"cached catalog() (median of {args.repeat})",
            f"{statistics.median(cached):.4f} ms",
            f"≤ {TARGET_CACHED_MS:g} ms",
            "ok" if statistics.median(cached) <= TARGET_CACHED_MS else "SLOW",
        ),
    ]
    print(f"DuckDB catalog: {n_tables} tables, {n_columns} columns")
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>12}  {'target':>9}  verdict")
    for name, value, target, verdict in rows:
        print(f"{name:<{width}}  {value:>12}  {target:>9}  {verdict}")
    print(
        f"cached is {statistics.median(cold) * 1000 / statistics.median(cached):,.0f}x faster than a cold load"
    )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "tables": n_tables,
                "columns": n_columns,
                "generate_s": generate_s,
                "cold_in_process_s": cold,
                "cold_fresh_process_s": process_s,
                "fresh_process_wall_s": process_wall_s,
                "refresh_s": refresh,
                "cached_ms": cached,
                "load_seconds_reported": load_seconds,
                "targets": {"cold_s": TARGET_COLD_S, "cached_ms": TARGET_CACHED_MS},
                "meets_targets": max(cold) <= TARGET_COLD_S
                and process_s <= TARGET_COLD_S
                and statistics.median(cached) <= TARGET_CACHED_MS,
            },
            indent=2,
        )
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
