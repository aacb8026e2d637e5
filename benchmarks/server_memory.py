"""Server memory with several sessions storing big results (issue 21): a real `flexsql serve --http`
process, its RSS read from /proc while 5 concurrent MCP sessions (the SDK client, SSE sessions)
each run a query whose result fills a session's store, against the configured server-wide budget
([limits] server_store_mb) — the idle RSS of the same process, measured first, is the baseline.

Two servers run in the same benchmark: one with the budget (the default 1,024 MB, or --budget-mb),
one with the budget set out of reach (65,536 MB: every session keeps its own store_mb, as before).
Then one-cell cases on the budgeted server: a DuckDB `list(range)` of --list-elements elements and,
with --pg (or FLEXSQL_TEST_PG_DSN), a PostgreSQL `string_agg` of --pg-mb MB, both cut by the engine.

Usage: python benchmarks/server_memory.py [--sessions 5] [--rows 600000] [--store-mb 512]
       [--budget-mb 1024] [--list-elements 20000000] [--pg DSN] [--pg-mb 256]
Prints a table; writes benchmarks/results/server_memory.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1024 * 1024


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sampler:
    """The process's RSS every 50 ms, in a thread; `peak` since the last `reset`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.05)

    def reset(self) -> None:
        self.peak = rss_mb(self.pid)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def server(urls: list[str], config: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    args = [sys.executable, "-P", "-m", "flexsql.server", "serve", "--http", "--port", str(port)]
    args += [a for url in urls for a in ("--db", url)] + ["--config", str(config), "--no-python"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEXSQL_") or k == "FLEXSQL_CACHE_DIR"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("server exited: " + proc.stderr.read().decode(errors="replace")[-2000:])  # type: ignore[union-attr]
            with contextlib.closing(socket.socket()) as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def call(url: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    from mcp import Client

    async with Client(url, mode="legacy") as client:
        result = await client.call_tool(tool, args)
        text = "\n".join(getattr(b, "text", "") for b in result.content)
        return {"error": result.is_error, "text": text[:300], "structured": result.structured_content or {}}


async def sessions_storing(url: str, sessions: int, sql: str) -> list[dict[str, Any]]:
    """`sessions` SSE sessions at once, each storing the result of `sql` and holding its session open
    until all have stored theirs (a session's store lives as long as its session)."""
    from mcp import Client

    outcomes: list[dict[str, Any]] = [{} for _ in range(sessions)]
    stored = anyio.Event()
    done = 0

    async def one(i: int) -> None:
        nonlocal done
        async with Client(url, mode="legacy", read_timeout_seconds=600) as client:
            result = await client.call_tool("run_query", {"sql": sql})
            out = result.structured_content or {}
            outcomes[i] = {
                "error": result.is_error,
                "total_rows": out.get("total_rows"),
                "id": out.get("result_id"),
            }
            done += 1
            if done == sessions:
                stored.set()
            await stored.wait()
            await anyio.sleep(0.5)  # the samples after the last store, every session still open

    async with anyio.create_task_group() as group:
        for i in range(sessions):
            group.start_soon(one, i)
    return outcomes


def make_duckdb(directory: Path, rows: int) -> str:
    import duckdb

    path = directory / "big.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(f"CREATE TABLE big AS SELECT i, repeat('x', 1000) || i AS pad FROM range({rows}) r(i)")
    conn.close()
    return f"duckdb:///{path}"


def measure_sessions(db: str, config: Path, sessions: int) -> dict[str, Any]:
    with server([f"big={db}"], config) as (endpoint, proc):
        anyio.run(call, endpoint, "run_query", {"sql": "SELECT count(*) FROM big"})  # warm: catalog, engine
        time.sleep(1.0)
        idle = rss_mb(proc.pid)
        sampler = Sampler(proc.pid)
        sampler.reset()
        started = time.perf_counter()
        outcomes = anyio.run(sessions_storing, endpoint, sessions, "SELECT i, pad FROM big")
        seconds = time.perf_counter() - started
        time.sleep(0.3)
        sampler.stop()
        return {
            "idle_rss_mb": round(idle, 1),
            "peak_rss_mb": round(sampler.peak, 1),
            "peak_over_idle_mb": round(sampler.peak - idle, 1),
            "seconds": round(seconds, 1),
            "sessions_ok": sum(1 for o in outcomes if o and not o["error"]),
        }


def measure_cell(db_urls: list[str], config: Path, source: str, sql: str) -> dict[str, Any]:
    with server(db_urls, config) as (endpoint, proc):
        anyio.run(call, endpoint, "run_query", {"sql": "SELECT 1", "source": source})
        time.sleep(1.0)
        idle = rss_mb(proc.pid)
        sampler = Sampler(proc.pid)
        sampler.reset()
        started = time.perf_counter()
        outcome = anyio.run(call, endpoint, "run_query", {"sql": sql, "source": source})
        seconds = time.perf_counter() - started
        sampler.stop()
        out = outcome["structured"]
        return {
            "idle_rss_mb": round(idle, 1),
            "peak_rss_mb": round(sampler.peak, 1),
            "peak_over_idle_mb": round(sampler.peak - idle, 1),
            "seconds": round(seconds, 1),
            "ok": not outcome["error"],
            "cells_cut": out.get("cells_cut"),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--rows", type=int, default=600_000, help="rows of ~1 KB each session stores")
    parser.add_argument("--store-mb", type=int, default=512, help="[limits] store_mb (one session's store)")
    parser.add_argument("--budget-mb", type=int, default=1024, help="[limits] server_store_mb")
    parser.add_argument("--list-elements", type=int, default=20_000_000)
    parser.add_argument("--pg", default=os.environ.get("FLEXSQL_TEST_PG_DSN"))
    parser.add_argument("--pg-mb", type=int, default=256)
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flexsql-bench-") as tmp:
        folder = Path(tmp)
        db = make_duckdb(folder, args.rows)
        for label, budget in (("server budget", args.budget_mb), ("budget out of reach", 65536)):
            config = folder / f"budget_{budget}.toml"
            config.write_text(f"[limits]\nstore_mb = {args.store_mb}\nserver_store_mb = {budget}\n")
            case = measure_sessions(db, config, args.sessions)
            rows.append(
                {
                    "case": f"{args.sessions} sessions × {args.rows:,} rows, {label}",
                    "budget_mb": budget,
                    **case,
                }
            )
        config = folder / "cells.toml"
        config.write_text(f"[limits]\nstore_mb = {args.store_mb}\nserver_store_mb = {args.budget_mb}\n")
        rows.append(
            {
                "case": f"DuckDB list(range) of {args.list_elements:,} elements, one cell",
                "budget_mb": args.budget_mb,
                **measure_cell(
                    [f"big={db}"], config, "big", f"SELECT list(range) AS xs FROM range({args.list_elements})"
                ),
            }
        )
        if args.pg:
            rows.append(
                {
                    "case": f"PostgreSQL string_agg of {args.pg_mb} MB, one cell",
                    "budget_mb": args.budget_mb,
                    **measure_cell(
                        [f"pg={args.pg}"],
                        config,
                        "pg",
                        f"SELECT string_agg(repeat('x', 1024), '') AS s FROM generate_series(1, {args.pg_mb * 1024})",
                    ),
                }
            )

    header = f"{'case':62} {'budget':>7} {'idle':>7} {'peak':>7} {'peak-idle':>9} {'s':>6}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['case']:62} {r['budget_mb']:>7} {r['idle_rss_mb']:>7} {r['peak_rss_mb']:>7} "
            f"{r['peak_over_idle_mb']:>9} {r['seconds']:>6}"
        )
    RESULTS.mkdir(exist_ok=True)
    out = {
        "store_mb": args.store_mb,
        "budget_mb": args.budget_mb,
        "sessions": args.sessions,
        "rows_per_result": args.rows,
        "cases": rows,
    }
    (RESULTS / "server_memory.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS / 'server_memory.json'}")


if __name__ == "__main__":
    main()
