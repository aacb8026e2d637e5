"""How long the demo database takes to build, and how big it gets, per scale.

    python benchmarks/demo_build.py            # scales 1 and 10
    python benchmarks/demo_build.py --full     # also scale 100 (10 million order lines)

Builds into a temporary directory (never the user's cache), prints a table and writes
benchmarks/results/demo_build.json. The target: scale 1 in under 5 s, scale 100 in under 60 s on
two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import duckdb

from flexsql.demo_db.build import build_demo_db
from flexsql.demo_db.cache import GENERATOR_VERSION

RESULTS = Path(__file__).parent / "results" / "demo_build.json"
TARGET_S = {1.0: 5.0, 100.0: 60.0}


def measure(scale: float, directory: Path) -> dict:
    path = directory / f"demo-{scale:g}.duckdb"
    load_before = os.getloadavg()[0]
    started, cpu_started = time.perf_counter(), time.process_time()
    build_demo_db(path, scale=scale)
    seconds = time.perf_counter() - started
    # CPU seconds of every DuckDB thread: far less sensitive than wall time to other work on the box
    cpu_s = time.process_time() - cpu_started
    size_mb = path.stat().st_size / 1e6
    with duckdb.connect(str(path), read_only=True) as conn:
        fact_rows = conn.execute("SELECT count(*) FROM order_items").fetchone()[0]
        total_rows = sum(
            r[0] or 0
            for r in conn.execute("SELECT estimated_size FROM duckdb_tables() WHERE NOT internal").fetchall()
        )
        # a typical analytical query over the fact table, to show what the size means for readers
        q_started = time.perf_counter()
        conn.execute(
            "SELECT p.category_id, sum(i.quantity * i.unit_price) FROM order_items i "
            "JOIN products p USING (product_id) GROUP BY 1"
        ).fetchall()
        query_ms = (time.perf_counter() - q_started) * 1000
    path.unlink()
    return {
        "scale": scale,
        "fact_rows": fact_rows,
        "all_rows": total_rows,
        "seconds": round(seconds, 2),
        "cpu_s": round(cpu_s, 2),
        "file_mb": round(size_mb, 1),
        "fact_rows_per_s": round(fact_rows / seconds),
        "revenue_by_category_ms": round(query_ms, 1),
        "target_s": TARGET_S.get(scale),
        # other work on the machine inflates the time: the 1-minute load average around the build
        "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also build scale 100 (10M order lines, ~1 GB)")
    parser.add_argument("--scales", type=float, nargs="*", help="build exactly these scales instead")
    args = parser.parse_args()
    scales = args.scales or ([1.0, 10.0, 100.0] if args.full else [1.0, 10.0])

    rows = []
    with tempfile.TemporaryDirectory(prefix="flexsql-demo-bench-") as tmp:
        for scale in scales:
            row = measure(scale, Path(tmp))
            rows.append(row)
            print(f"scale {scale:g}: {row['seconds']} s", flush=True)

    header = (
        f"{'scale':>7} {'fact rows':>12} {'all rows':>12} {'seconds':>8} {'cpu s':>7} {'file MB':>8} {'rows/s':>11} "
        f"{'query ms':>9} {'target s':>8} {'load avg':>10}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        load = f"{r['load_avg'][0]:.1f}-{r['load_avg'][1]:.1f}"
        target = "" if r["target_s"] is None else f"{r['target_s']:g}"
        print(
            f"{r['scale']:>7g} {r['fact_rows']:>12,} {r['all_rows']:>12,} {r['seconds']:>8.2f} {r['cpu_s']:>7.1f} {r['file_mb']:>8.1f} "
            f"{r['fact_rows_per_s']:>11,} {r['revenue_by_category_ms']:>9.1f} {target:>8} "
            f"{load:>10}"
        )
    base = rows[0]
    for r in rows[1:]:
        print(
            f"scale {r['scale']:g} vs {base['scale']:g}: {r['fact_rows'] / base['fact_rows']:.0f}x rows in "
            f"{r['seconds'] / base['seconds']:.1f}x the time"
        )

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "demo_build",
                "generator_version": GENERATOR_VERSION,
                "duckdb": duckdb.__version__,
                "python": platform.python_version(),
                "cpu_count": os.cpu_count(),
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
