"""Server memory while serving big results with default limits (issue 13).

Each case runs `run_query` (max_rows=20) the way the server does, in a fresh process, and reports
that process's peak RSS and its ratio to `limits.store_mb` (the result store's byte budget). The
goal is peak RSS <= 2 x store_mb + the engine's own memory limit (`limits.engine_memory_mb`).

Cases: PostgreSQL `SELECT` of N x 1 KB rows (default 2M; needs FLEXSQL_TEST_PG_DSN or --pg), and
a DuckDB list of M elements (default 100M) in one cell.

Usage: python benchmarks/memory.py [--pg DSN] [--pg-rows N] [--list-elements M]
Prints a table; writes benchmarks/results/memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

CHILD = r"""
import json, resource, sys, time
from flexsql.config import LimitsConfig
from flexsql.errors import FlexSQLError
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.query import run_query
from flexsql.tools.engines import SourceRegistry, open_source

url, sql = sys.argv[1], sys.argv[2]
src = open_source(url, name="bench")
ctx = ToolContext(sources=SourceRegistry([src]), limits=LimitsConfig())
started = time.perf_counter()
outcome = {}
try:
    out = run_query(ctx, sql, max_rows=20)
    outcome = {"ok": True, "total_rows": out.total_rows, "lower_bound": out.total_is_lower_bound,
               "kept_rows": len(ctx.results.get(out.result_id).rows)}
except FlexSQLError as exc:
    outcome = {"ok": False, "error": str(exc)[:300]}
outcome["seconds"] = round(time.perf_counter() - started, 2)
outcome["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(outcome))
"""


def run_case(url: str, sql: str, timeout_s: float) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, url, sql], capture_output=True, text=True, timeout=timeout_s
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ok": False, "error": (proc.stderr or "no output").strip().splitlines()[-1][:300]}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=os.environ.get("FLEXSQL_TEST_PG_DSN"))
    parser.add_argument("--pg-rows", type=int, default=2_000_000)
    parser.add_argument("--list-elements", type=int, default=100_000_000)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()

    from flexsql.config import LimitsConfig

    limits = LimitsConfig()
    cases = []
    if args.pg:
        cases.append(
            (
                f"postgres {args.pg_rows:,} x 1 KB rows",
                args.pg,
                f"SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, {args.pg_rows}) g",
            )
        )
    cases.append(
        (
            f"duckdb list of {args.list_elements:,}",
            "duckdb://:memory:",
            f"SELECT list(range) AS l FROM range({args.list_elements})",
        )
    )
    rows = []
    for label, url, sql in cases:
        started = time.perf_counter()
        result = run_case(url, sql, args.timeout)
        result.update(
            case=label,
            wall_s=round(time.perf_counter() - started, 1),
            ratio_to_store_mb=round(result.get("peak_rss_mb", 0) / limits.store_mb, 2),
            goal_mb=2 * limits.store_mb + limits.engine_memory_mb,
        )
        rows.append(result)

    print(
        f"limits: store_mb={limits.store_mb} store_rows={limits.store_rows:,} engine_memory_mb={limits.engine_memory_mb}"
    )
    print(f"{'case':36} {'peak RSS MB':>12} {'x store_mb':>10} {'goal MB':>8} {'seconds':>8}  outcome")
    for r in rows:
        outcome = (
            f"{r.get('total_rows'):,}{'+' if r.get('lower_bound') else ''} rows, {r.get('kept_rows'):,} kept"
            if r.get("ok")
            else f"error: {r.get('error')}"
        )
        print(
            f"{r['case']:36} {r.get('peak_rss_mb', 0):>12,.0f} {r['ratio_to_store_mb']:>10} {r['goal_mb']:>8} "
            f"{r.get('seconds', r['wall_s']):>8}  {outcome}"
        )
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "limits": limits.model_dump(),
        "cases": rows,
        "host_max_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }
    (RESULTS / "memory.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
