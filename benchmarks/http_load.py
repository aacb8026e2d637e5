"""Streamable HTTP under load: N concurrent MCP clients × M mixed tool calls against one
`flexsql serve --http` process on the demo database. Reports errors, p50/p99 latency per tool and
the server's resident memory over the run (it should stay flat).

    python benchmarks/http_load.py [--clients 8] [--calls 200] [--scale 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support
from tests.support.mcp_support import http_server  # noqa: E402

MIX = [
    ("list_tables", {"limit": 20}),
    ("describe_table", {"table": "orders"}),
    ("run_query", {"sql": "SELECT status, count(*) AS n FROM orders GROUP BY status ORDER BY status"}),
    ("sample_rows", {"table": "customers", "limit": 5}),
    ("distinct_values", {"table": "orders", "column": "status"}),
    ("search_schema", {"query": "revenue by product category", "limit": 5}),
    ("find_values", {"text": "France", "limit": 5}),
    ("validate_sql", {"sql": "SELECT count(*) FROM order_items"}),
    ("list_sources", {}),
]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def client_run(
    url: str, calls: int, offset: int, latencies: dict[str, list[float]], errors: list[str]
) -> None:
    async with Client(url) as client:
        for i in range(calls):
            tool, args = MIX[(i + offset) % len(MIX)]
            started = time.perf_counter()
            result = await client.call_tool(tool, args)
            latencies.setdefault(tool, []).append((time.perf_counter() - started) * 1000)
            if result.is_error:
                errors.append(f"{tool}: {result.content[0].text[:200]}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()

    from flexsql.demo_db.cache import demo_url

    db = demo_url(args.scale)
    with http_server(db) as (url, proc):
        # warm-up: catalog, value index and search index are built once per server
        anyio.run(client_run, url, len(MIX), 0, {}, [])
        memory: list[tuple[float, int]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                memory.append((time.monotonic(), rss_kb(proc.pid)))
                time.sleep(0.25)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        latencies: dict[str, list[float]] = {}
        errors: list[str] = []

        async def run_all() -> None:
            async with anyio.create_task_group() as tg:
                for c in range(args.clients):
                    tg.start_soon(client_run, url, args.calls, c, latencies, errors)

        started = time.perf_counter()
        anyio.run(run_all)
        wall = time.perf_counter() - started
        stop.set()
        sampler.join()

    every = [v for vs in latencies.values() for v in vs]
    rss = [kb for _, kb in memory]
    third = max(1, len(rss) // 3)
    early, late = statistics.mean(rss[:third]), statistics.mean(rss[-third:])
    report = {
        "clients": args.clients,
        "calls_per_client": args.calls,
        "total_calls": len(every),
        "errors": len(errors),
        "error_samples": errors[:5],
        "wall_s": round(wall, 2),
        "calls_per_s": round(len(every) / wall, 1),
        "p50_ms": round(pct(every, 0.5), 2),
        "p99_ms": round(pct(every, 0.99), 2),
        "per_tool": {
            t: {"n": len(v), "p50_ms": round(pct(v, 0.5), 2), "p99_ms": round(pct(v, 0.99), 2)}
            for t, v in sorted(latencies.items())
        },
        "rss_mb_first_third": round(early / 1024, 1),
        "rss_mb_last_third": round(late / 1024, 1),
        "rss_mb_max": round(max(rss) / 1024, 1),
        "rss_growth_ratio": round(late / early, 3),
    }
    print(f"{'tool':<16}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}")
    for tool, row in report["per_tool"].items():
        print(f"{tool:<16}{row['n']:>6}{row['p50_ms']:>10}{row['p99_ms']:>10}")
    print(f"{'ALL':<16}{len(every):>6}{report['p50_ms']:>10}{report['p99_ms']:>10}")
    print(f"errors: {len(errors)}   wall: {report['wall_s']} s   throughput: {report['calls_per_s']} calls/s")
    print(
        f"server RSS: {report['rss_mb_first_third']} MB (first third) → {report['rss_mb_last_third']} MB "
        f"(last third), max {report['rss_mb_max']} MB, ratio {report['rss_growth_ratio']}"
    )
    out = Path(__file__).parent / "results" / "http_load.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
