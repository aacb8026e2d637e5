"""Server memory with several sessions storing big results (issue 21): a real `flexsql serve --http`
process, its RSS read from /proc while 5 concurrent MCP sessions (the SDK client, SSE sessions)
each run a query whose result fills a session's store, against the configured server-wide budget
([limits] server_store_mb) — the idle RSS of the same process, measured first, is the baseline.

RSS over idle is told apart with the server's own /healthz `memory`, polled while the sessions run:
`store` is what the result store holds at the RSS peak (stored results, the claims of fetches in
progress and the working memory held for running statements — [limits] statement_mb each, at most
[limits] server_statements at once: within server_store_mb by construction), `engine` what DuckDB holds by its own count
(duckdb_memory(): the file's blocks it caches, within [limits] engine_memory_mb) over its idle count,
`rest` the RSS beyond both: the Python allocators' slack, the one batch each fetch holds before it is
counted, and DuckDB's memory outside its own count (each running query's 10 MiB streaming buffer and
the chunks its threads build), which the statements' working memory holds room for; `beyond-engine`,
RSS over idle less the engine's own count: what server_store_mb has to bound. The `engine 64` case runs the same sessions with engine_memory_mb =
64 (below the 76 MB of blocks the scans read): the engine's count follows its own setting, not the
result store's. DuckDB's count (and its allocator's `resident`) includes what it has reserved but not
touched yet: in the list(range) case, where DuckDB builds a 20M-element list, both are above the RSS it
adds, so `rest` goes below zero there — that case's RSS is the engine's, the store holds nothing.

Two servers run with the same sessions: one with the budget (the default 1,024 MB, or --budget-mb),
one with the budget set out of reach (65,536 MB: every session keeps its own store_mb, as before);
then one session alone (its store_mb bounds it). Then one-cell cases on the budgeted server: a DuckDB
`list(range)` of --list-elements elements and, with --pg (or FLEXSQL_TEST_PG_DSN), a PostgreSQL
`string_agg` of --pg-mb MB, both cut by the engine.

With --allocators the server runs under this file (`--inside`), which reads DuckDB's allocator (its
bundled jemalloc's stats.resident) every 50 ms: `rest` is then split into `duckdb outside` (what
DuckDB's allocator holds beyond DuckDB's own count) and `python` (the RSS beyond the result store and
all of DuckDB's: the interpreter's allocators and the batch each fetch holds).

Usage: python benchmarks/server_memory.py [--allocators] [--sessions 5] [--rows 600000] [--store-mb 512]
       [--budget-mb 1024] [--engine-mb 64] [--list-elements 20000000] [--pg DSN] [--pg-mb 256]
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
from collections.abc import Callable, Iterator
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
    """The process's RSS every 50 ms and, given the server's /healthz, its `memory` every 100 ms, in
    threads; `peak` since the last `reset`, and the health figures read nearest before it."""

    def __init__(self, pid: int, health: str | None = None) -> None:
        self.pid = pid
        self.health = health
        self.peak = 0.0
        self.peak_at = self.idle_at = 0.0
        self.figures: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True)]
        if health is not None:
            self._threads.append(threading.Thread(target=self._poll, daemon=True))
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                rss = rss_mb(self.pid)
                if rss > self.peak:
                    self.peak, self.peak_at = rss, time.monotonic()
            time.sleep(0.05)

    def _poll(self) -> None:
        while not self._stop.is_set():
            read = memory_of(self.health)
            if read is not None:
                self.figures.append((time.monotonic(), read))
            time.sleep(0.1)

    def reset(self) -> None:
        self.peak, self.peak_at = rss_mb(self.pid), time.monotonic()
        self.idle_at = self.peak_at  # the moment idle was read (just before), for the allocator readings
        self.figures = []

    def at_peak(self) -> dict[str, Any]:
        """The health figures last read before the RSS peak (the first read when none was)."""
        before = [f for t, f in self.figures if t <= self.peak_at]
        return before[-1] if before else (self.figures[0][1] if self.figures else {})

    def most(self, *keys: str) -> float:
        """The largest sum of `keys` over the health figures read."""
        return max((sum(f.get(k) or 0 for k in keys) for _, f in self.figures), default=0.0)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def memory_of(health: str | None) -> dict[str, Any] | None:
    """/healthz's `memory` (None when the server has none to give)."""
    if health is None:
        return None
    import urllib.request

    try:
        with urllib.request.urlopen(health, timeout=10) as response:
            memory = json.loads(response.read()).get("memory")
    except (OSError, ValueError):
        return None
    return memory if isinstance(memory, dict) else None


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ALLOCATORS: list[Path] = []
"""Where the server under --allocators writes its allocator readings (set by main)."""


def duckdb_resident() -> Callable[[], int | None] | None:
    """Bytes DuckDB's bundled jemalloc holds resident (its stats.resident), read through the symbols its
    extension module exports; None where it has none (a build without jemalloc)."""
    import ctypes

    import _duckdb

    try:
        mallctl = ctypes.CDLL(_duckdb.__file__).duckdb_je_mallctl
    except (OSError, AttributeError):
        return None

    def read() -> int | None:
        epoch = ctypes.c_uint64(1)
        mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.c_size_t(8))
        value, size = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
        failed = mallctl(b"stats.resident", ctypes.byref(value), ctypes.byref(size), None, ctypes.c_size_t(0))
        return None if failed else int(value.value)

    return read


def inside(log: str, argv: list[str]) -> None:
    """`flexsql <argv>` in this process, with a thread writing DuckDB's resident bytes to `log` every 50
    ms (time.monotonic(), MB): the server of --allocators."""
    read = duckdb_resident()

    def sample() -> None:
        with open(log, "a", buffering=1) as out:
            while read is not None:
                value = read()
                if value is not None:
                    out.write(f"{time.monotonic()} {value / MB}\n")
                time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()
    sys.argv = ["flexsql", *argv]
    from flexsql.server.entry import run

    run()


def resident_at(moment: float) -> float | None:
    """DuckDB's resident MB last read at or before `moment` by the server of --allocators."""
    if not ALLOCATORS or not ALLOCATORS[0].exists():
        return None
    found = None
    for line in ALLOCATORS[0].read_text().splitlines():
        at, value = (float(x) for x in line.split())
        if at <= moment:
            found = value
    return found


@contextlib.contextmanager
def server(urls: list[str], config: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    args = [sys.executable, "-P", "-m", "flexsql.server", "serve", "--http", "--port", str(port)]
    if ALLOCATORS:
        ALLOCATORS[0].write_text("")
        args[2:4] = [str(Path(__file__).resolve()), "--inside", str(ALLOCATORS[0])]
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


def split(sampler: Sampler, idle: float, engine_idle: float) -> dict[str, Any]:
    """RSS over idle at the peak, and its parts from the server's /healthz read then (None: a server
    without the figures): the result store (results and claims), the engine's own count over idle,
    the rest; and the most either part held during the run."""
    over = sampler.peak - idle
    figures = sampler.at_peak()
    store = sum(figures.get(k) or 0.0 for k in ("result_store_mb", "result_claims_mb", "statements_mb"))
    engine = (figures.get("engine_mb") or 0.0) - engine_idle
    known = bool(figures)
    allocator = {}
    idle_resident, peak_resident = resident_at(sampler.idle_at), resident_at(sampler.peak_at)
    if known and idle_resident is not None and peak_resident is not None:
        duckdb_all = peak_resident - idle_resident
        allocator = {
            "duckdb_all_at_peak_mb": round(duckdb_all, 1),
            "duckdb_outside_count_mb": round(duckdb_all - engine, 1),
            "python_beyond_store_mb": round(over - store - duckdb_all, 1),
        }
    return {
        "idle_rss_mb": round(idle, 1),
        "peak_rss_mb": round(sampler.peak, 1),
        "peak_over_idle_mb": round(over, 1),
        "store_at_peak_mb": round(store, 1) if known else None,
        "engine_at_peak_mb": round(engine, 1) if known else None,
        "rest_at_peak_mb": round(over - store - engine, 1) if known else None,
        # what server_store_mb has to bound: everything over idle but the engine's own count
        "beyond_engine_mb": round(over - engine, 1) if known else None,
        "store_max_mb": round(sampler.most("result_store_mb", "result_claims_mb", "statements_mb"), 1)
        if known
        else None,
        "engine_max_mb": round(sampler.most("engine_mb") - engine_idle, 1) if known else None,
        "engine_limit_mb": figures.get("engine_limit_mb"),
        **allocator,
    }


def measure_sessions(db: str, config: Path, sessions: int) -> dict[str, Any]:
    with server([f"big={db}"], config) as (endpoint, proc):
        health = endpoint.replace("/mcp", "/healthz")
        anyio.run(call, endpoint, "run_query", {"sql": "SELECT count(*) FROM big"})  # warm: catalog, engine
        time.sleep(1.0)
        idle = rss_mb(proc.pid)
        engine_idle = (memory_of(health) or {}).get("engine_mb") or 0.0
        sampler = Sampler(proc.pid, health)
        sampler.reset()
        started = time.perf_counter()
        outcomes = anyio.run(sessions_storing, endpoint, sessions, "SELECT i, pad FROM big")
        seconds = time.perf_counter() - started
        time.sleep(0.3)
        sampler.stop()
        return {
            **split(sampler, idle, engine_idle),
            "seconds": round(seconds, 1),
            "sessions_ok": sum(1 for o in outcomes if o and not o["error"]),
        }


def measure_cell(db_urls: list[str], config: Path, source: str, sql: str) -> dict[str, Any]:
    with server(db_urls, config) as (endpoint, proc):
        health = endpoint.replace("/mcp", "/healthz")
        anyio.run(call, endpoint, "run_query", {"sql": "SELECT 1", "source": source})
        time.sleep(1.0)
        idle = rss_mb(proc.pid)
        engine_idle = (memory_of(health) or {}).get("engine_mb") or 0.0
        sampler = Sampler(proc.pid, health)
        sampler.reset()
        started = time.perf_counter()
        outcome = anyio.run(call, endpoint, "run_query", {"sql": sql, "source": source})
        seconds = time.perf_counter() - started
        sampler.stop()
        out = outcome["structured"]
        return {
            **split(sampler, idle, engine_idle),
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
    parser.add_argument(
        "--engine-mb", type=int, default=64, help="[limits] engine_memory_mb of the engine case"
    )
    parser.add_argument("--list-elements", type=int, default=20_000_000)
    parser.add_argument("--pg", default=os.environ.get("FLEXSQL_TEST_PG_DSN"))
    parser.add_argument("--pg-mb", type=int, default=256)
    parser.add_argument(
        "--allocators", action="store_true", help="split `rest` with DuckDB's allocator stats"
    )
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flexsql-bench-") as tmp:
        folder = Path(tmp)
        if args.allocators:
            ALLOCATORS.append(folder / "allocators.log")
        db = make_duckdb(folder, args.rows)
        cases = [
            (f"{args.sessions} sessions", args.sessions, "server budget", args.budget_mb, None),
            (f"{args.sessions} sessions", args.sessions, "budget out of reach", 65536, None),
            (
                f"{args.sessions} sessions",
                args.sessions,
                f"engine {args.engine_mb}",
                args.budget_mb,
                args.engine_mb,
            ),
            ("1 session", 1, "server budget", args.budget_mb, None),
        ]
        for who, sessions, label, budget, engine_mb in cases:
            config = folder / f"case_{len(rows)}.toml"
            engine = f"engine_memory_mb = {engine_mb}\n" if engine_mb is not None else ""
            config.write_text(f"[limits]\nstore_mb = {args.store_mb}\nserver_store_mb = {budget}\n{engine}")
            case = measure_sessions(db, config, sessions)
            rows.append({"case": f"{who} × {args.rows:,} rows, {label}", "budget_mb": budget, **case})
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

    keys = ["store_at_peak_mb", "engine_at_peak_mb", "rest_at_peak_mb", "beyond_engine_mb"]
    titles = ["store", "engine", "rest", "beyond-engine"]
    if args.allocators:
        keys += ["duckdb_outside_count_mb", "python_beyond_store_mb"]
        titles += ["duckdb-out", "python"]
    header = f"{'case':58} {'budget':>7} {'idle':>7} {'peak':>7} {'peak-idle':>9} " + " ".join(
        f"{t:>{max(len(t), 7)}}" for t in titles
    )
    print(header + f" {'s':>6}")
    print("-" * (len(header) + 7))
    for r in rows:
        split = " ".join(
            f"{'-' if r.get(k) is None else r[k]:>{max(len(t), 7)}}"
            for k, t in zip(keys, titles, strict=True)
        )
        print(
            f"{r['case']:58} {r['budget_mb']:>7} {r['idle_rss_mb']:>7} {r['peak_rss_mb']:>7} "
            f"{r['peak_over_idle_mb']:>9} {split} {r['seconds']:>6}"
        )
    print(
        "store: results, fetch claims and running statements' working memory at the RSS peak (within the "
        "budget); engine: DuckDB's own count over idle (within engine_memory_mb); rest: RSS beyond both; "
        "beyond-engine: peak-idle less the engine's own count, which server_store_mb bounds"
        + (
            "; duckdb-out: DuckDB's allocator beyond its own count; python: the rest less all of DuckDB's"
            if args.allocators
            else ""
        )
    )
    RESULTS.mkdir(exist_ok=True)
    out = {
        "store_mb": args.store_mb,
        "budget_mb": args.budget_mb,
        "engine_mb_case": args.engine_mb,
        "sessions": args.sessions,
        "rows_per_result": args.rows,
        "cases": rows,
    }
    (RESULTS / "server_memory.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS / 'server_memory.json'}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inside"]:
        inside(sys.argv[2], sys.argv[3:])
    else:
        main()
