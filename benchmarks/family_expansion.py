"""What a family reference costs before the engine runs it, and what the bounds cost (issue 30, item 2).

The attack of the red team: `SELECT 1 FROM "*" a` on a DuckDB file of N tables, each with its own 40
columns (the union is N × 40N cells). Before the bounds it built the whole union (354 million characters
on 500 tables) for 76-103 s and +0.7-1.2 GB before the guard refused its length. Now it is refused
before anything is built. Also measured: a family near the bound ([limits] family_cells, 25,000 cells:
366 shards of 60 columns) expanded, guarded and run, against a plain query in the same run.

    python benchmarks/family_expansion.py [--tables 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from flexsql.errors import FlexSQLError  # noqa: E402
from flexsql.tools.engines import open_source  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(source, sql: str, repeat: int) -> tuple[float, str]:
    times, outcome = [], ""
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            result = source.execute(sql, timeout_s=30)
            outcome = f"{result.total_rows} row(s)"
        except FlexSQLError as exc:
            outcome = str(exc)[:110]
        times.append(time.perf_counter() - started)
    return statistics.median(times), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        wide = Path(tmp) / "wide.duckdb"
        with duckdb.connect(str(wide)) as conn:
            for i in range(args.tables):
                cols = ", ".join(f"c{i}_{j} INTEGER" for j in range(40))
                conn.execute(f"CREATE TABLE t{i:04d} ({cols})")
            # near the bound: 366 daily shards of 60 shared columns, 21,960 cells
            for d in range(366):
                conn.execute(f"CREATE TABLE ga_{d:04d} ({', '.join(f'col_{j} INTEGER' for j in range(60))})")
        source = open_source(f"duckdb:///{wide}")
        source.catalog()
        cases = [
            ("plain SELECT 1 (baseline)", "SELECT 1"),
            ('attack: SELECT 1 FROM "*" a', 'SELECT 1 FROM "*" a'),
            ("attack: 5 references of t0*", "SELECT 1 FROM " + ", ".join(f"t0* x{i}" for i in range(5))),
            ("ga_* 366 shards × 60 columns", "SELECT count(*) FROM ga_*"),
            ("t00* 100 shards × 4,000 columns", "SELECT count(*) FROM t00* a"),
        ]
        base = None
        for label, sql in cases:
            before = _rss_mb()
            seconds, outcome = _timed(source, sql, args.repeat)
            base = base if base is not None else seconds
            rows.append(
                {
                    "case": label,
                    "median_s": round(seconds, 3),
                    "x_baseline": round(seconds / base, 1) if base else None,
                    "peak_rss_growth_mb": round(_rss_mb() - before, 1),
                    "outcome": outcome,
                }
            )
        source.close()
    print(f"{'case':<36}{'median s':>10}{'x base':>9}{'+peak MB':>10}  outcome")
    for r in rows:
        print(
            f"{r['case']:<36}{r['median_s']:>10}{r['x_baseline']:>9}{r['peak_rss_growth_mb']:>10}  {r['outcome']}"
        )
    out = Path(__file__).parent / "results" / "family_expansion.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"tables": args.tables, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
