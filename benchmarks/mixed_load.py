"""The server under mixed load (issue 30, items 10 and 11): one `flexsql serve --http` process; N
sessions at once (2025 SSE sessions, in a client process of their own) each repeating one kind of
work — a big result (`SELECT * FROM big`, ~1 KB rows, then a page of it), an aggregation over `big`,
run_python on a stored result, `ask` with a hostile model (every reply carries 3 MB of reasoning; every
third is `{}`× just under [model] max_reply_bytes) — while an idle client (this process) runs
`SELECT 1` every 250 ms and times each call.

Memory: the server's RSS over its idle RSS (read after each kind of work ran once: what a first call
loads for good is not load), against the documented bound (`server_store_mb` +
`engine_memory_mb`), told apart with the server's own /healthz figures read nearest before the peak
(`store`: results, fetch claims and running statements' working memory; `engine`: DuckDB's own count
over idle; `rest`: the RSS beyond both). run_python's sandboxes are processes of their own, each
within [sandbox] memory_mb: their RSS is reported apart (`sandboxes`), outside the server's bound.
Latency: the idle client's p50/p95/max with the server otherwise idle (baseline, same run) and under
the load.

    python benchmarks/mixed_load.py [--sessions 16] [--seconds 60] [--store-mb 256] [--engine-mb 256]
        [--rows 200000]

Prints a table; writes benchmarks/results/mixed_load.json. The machine's load average is recorded:
on a shared machine the latency figures carry its other work too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from flexsql.config import ModelEndpoint  # noqa: E402
from tests.support.agent_support import StageScript, build_shop  # noqa: E402
from tests.support.hostile_model import braces  # noqa: E402
from tests.support.mcp_support import free_port, server_env  # noqa: E402
from tests.support.openai_stub import OpenAIStub, Reply, StubRequest  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "mixed_load.json"
CAP = ModelEndpoint().max_reply_bytes
MB = 1024 * 1024
ROLES = ("big", "query", "python", "ask")
BENIGN = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"})
REASONING = "r" * 3_000_000


# -- the roles that run in processes of their own -------------------------------------------------


def run_stub(url_file: Path) -> None:
    """The hostile model endpoint: a well-formed answer with 3 MB of reasoning, every third reply
    `{}`× just under the reply cap."""
    count = {"n": 0}

    def script(req: StubRequest) -> Any:
        count["n"] += 1
        if count["n"] % 3 == 0:
            return Reply(content=braces(CAP - 4096), usage=(1_000, 1_000))
        reply = BENIGN(req)
        if isinstance(reply, Reply):
            reply.reasoning = REASONING
            return reply
        return Reply(content=reply, reasoning=REASONING, usage=(1_000, 1_000))

    with OpenAIStub(script, keep_requests=False) as stub:
        url_file.write_text(stub.base_url)
        while True:
            time.sleep(3600)


async def one_session(
    url: str, role: str, deadline: float, tally: dict[str, list[int]], errors: dict[str, str]
) -> None:
    ok = failed = 0
    async with Client(url, mode="legacy", read_timeout_seconds=600) as client:
        stored: str | None = None
        while time.monotonic() < deadline:
            if role == "big":
                result = await client.call_tool("run_query", {"sql": "SELECT * FROM big", "max_rows": 5})
                rid = (result.structured_content or {}).get("result_id")
                if rid:
                    await client.call_tool("fetch_rows", {"result_id": rid, "offset": 1000, "limit": 50})
            elif role == "query":
                sql = (
                    "SELECT i % 97 AS k, count(*) AS n, max(length(pad)) AS w FROM big GROUP BY 1 ORDER BY 1"
                )
                result = await client.call_tool("run_query", {"sql": sql})
            elif role == "python":
                if stored is None:  # (again, when the budget evicted it)
                    first = await client.call_tool("run_query", {"sql": "SELECT * FROM big LIMIT 20000"})
                    stored = (first.structured_content or {}).get("result_id")
                code = "df.groupby(df['i'] % 10)['pad'].apply(lambda s: s.str.len().sum()).sum()"
                result = await client.call_tool("run_python", {"code": code, "result_ids": [stored or "r1"]})
                if result.is_error and "evicted" in result.content[0].text:  # type: ignore[union-attr]
                    stored = None
            else:
                result = await client.call_tool("ask", {"question": "How many orders are there?"})
            if result.is_error:
                failed += 1
                errors.setdefault(role, result.content[0].text[:300])  # type: ignore[union-attr]
            else:
                ok += 1
    tally.setdefault(role, [0, 0])
    tally[role][0] += ok
    tally[role][1] += failed


async def run_load(url: str, sessions: int, seconds: float, roles: list[str]) -> None:
    """The working sessions; prints {role: [ok, failed]} as JSON when their time is up."""
    tally: dict[str, list[int]] = {}
    errors: dict[str, str] = {}
    deadline = time.monotonic() + seconds
    async with anyio.create_task_group() as group:
        for i in range(sessions):
            group.start_soon(one_session, url, roles[i % len(roles)], deadline, tally, errors)
    print(json.dumps({"tally": tally, "errors": errors}), flush=True)


# -- this process: the server, the samplers, the idle client ---------------------------------------


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with contextlib.suppress(OSError):
                children = [int(c) for c in (task / "children").read_text().split()]
                found += children
                todo += children
    return found


class Sampler:
    """The server's RSS (and its children's, together) every 50 ms; /healthz every 200 ms."""

    def __init__(self, pid: int, health: str) -> None:
        self.pid, self.health = pid, health
        self.peak = self.peak_at = self.children_peak = 0.0
        self.figures: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._rss, daemon=True),
            threading.Thread(target=self._poll, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _rss(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                rss = rss_mb(self.pid)
                if rss > self.peak:
                    self.peak, self.peak_at = rss, time.monotonic()
                children = 0.0
                for child in descendants(self.pid):
                    with contextlib.suppress(OSError, ValueError):
                        children += rss_mb(child)
                self.children_peak = max(self.children_peak, children)
            time.sleep(0.05)

    def _poll(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(self.health, timeout=10) as response:
                    memory = json.loads(response.read()).get("memory")
                if isinstance(memory, dict):
                    self.figures.append((time.monotonic(), memory))
            time.sleep(0.2)

    def at_peak(self) -> dict[str, Any]:
        before = [f for t, f in self.figures if t <= self.peak_at]
        return before[-1] if before else (self.figures[0][1] if self.figures else {})

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


@contextlib.contextmanager
def http_server(db: str, config: Path, log: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [sys.executable, "-P", "-m", "flexsql.server", "serve", "--http", "--port", str(port)]
    with open(log, "ab") as sink:
        proc = subprocess.Popen(
            [*command, "--db", db, "--config", str(config)], env=server_env(), stdout=sink, stderr=sink
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("server exited: " + log.read_text(errors="replace")[-2000:])
            with contextlib.closing(socket.socket()) as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("the server did not start listening within 60 s")
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_role(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


async def warm(url: str) -> None:
    """Each kind of work once, before idle is read: what the first call of each loads for good (the
    agent's and run_python's modules, the sandbox, the catalog) is not load."""
    async with Client(url, mode="legacy", read_timeout_seconds=600) as client:
        first = await client.call_tool("run_query", {"sql": "SELECT * FROM big LIMIT 1000"})
        rid = (first.structured_content or {}).get("result_id") or "r1"
        await client.call_tool("fetch_rows", {"result_id": rid, "offset": 10, "limit": 10})
        await client.call_tool("run_python", {"code": "df['pad'].str.len().sum()", "result_ids": [rid]})
        await client.call_tool("ask", {"question": "How many orders are there?"})


async def probe(url: str, seconds: float, every_s: float = 0.25) -> list[float]:
    """The idle client: SELECT 1 every `every_s` for `seconds`; each call's latency in seconds."""
    latencies: list[float] = []
    async with Client(url, mode="legacy", read_timeout_seconds=600) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            result = await client.call_tool("run_query", {"sql": "SELECT 1"})
            latencies.append(time.perf_counter() - started)
            if result.is_error:
                print("probe error:", result.content[0].text[:200], flush=True)  # type: ignore[union-attr]
            await anyio.sleep(every_s)
    return latencies


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(latencies: list[float]) -> dict[str, float | int]:
    return {
        "probes": len(latencies),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p95_ms": round(pct(latencies, 0.95) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
    }


def make_database(folder: Path, rows: int) -> str:
    import duckdb

    shop = build_shop(folder)
    shop.close()
    path = shop.url.removeprefix("duckdb:///")
    conn = duckdb.connect(path)
    conn.execute(f"CREATE TABLE big AS SELECT i, repeat('x', 1000) || i AS pad FROM range({rows}) r(i)")
    conn.close()
    return shop.url


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load runs")
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    parser.add_argument("--store-mb", type=int, default=256, help="[limits] server_store_mb")
    parser.add_argument("--engine-mb", type=int, default=256, help="[limits] engine_memory_mb")
    parser.add_argument("--rows", type=int, default=200_000, help="~1 KB rows of the big table")
    parser.add_argument(
        "--roles",
        default=",".join(ROLES),
        help=f"the kinds of work, shared out over the sessions ({', '.join(ROLES)})",
    )
    parser.add_argument("--role", choices=["stub", "load"], help=argparse.SUPPRESS)
    parser.add_argument("--url-file", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "stub":
        run_stub(Path(args.url_file))
        return
    if args.role == "load":
        anyio.run(run_load, args.url, args.sessions, args.seconds, args.roles.split(","))
        return

    with tempfile.TemporaryDirectory(prefix="flexsql-mixed-") as tmp:
        folder = Path(tmp)
        os.environ.setdefault("FLEXSQL_CACHE_DIR", str(folder / "cache"))
        db = make_database(folder, args.rows)
        url_file = folder / "model-url"
        stub = start_role("--role", "stub", "--url-file", str(url_file))
        try:
            while not url_file.exists() or not url_file.read_text():
                time.sleep(0.05)
            config = folder / "flexsql.toml"
            config.write_text(
                f"[limits]\nserver_store_mb = {args.store_mb}\nstore_mb = {min(512, args.store_mb)}\n"
                f"engine_memory_mb = {args.engine_mb}\n\n"
                f'[model]\nbase_url = "{url_file.read_text()}"\nmodel = "stub"\nmax_retries = 0\n\n'
                "[agent]\nplans = 2\nmax_seconds = 60.0\nevaluate = false\n"
            )
            with http_server(db, config, folder / "server.log") as (url, pid):
                health = url.replace("/mcp", "/healthz")
                anyio.run(warm, url)
                baseline = anyio.run(probe, url, args.baseline_seconds)
                time.sleep(3.0)  # past the engine's 2 s idle release
                idle = rss_mb(pid)
                with urllib.request.urlopen(health, timeout=10) as response:
                    engine_idle = (json.loads(response.read()).get("memory") or {}).get("engine_mb") or 0.0
                sampler = Sampler(pid, health)
                sampler.peak = idle
                load_avg_before = os.getloadavg()
                load = start_role(
                    "--role",
                    "load",
                    "--url",
                    url,
                    "--sessions",
                    str(args.sessions),
                    "--seconds",
                    str(args.seconds),
                    "--roles",
                    args.roles,
                )
                time.sleep(min(5.0, args.seconds / 4))  # the sessions open and start their work
                loaded = anyio.run(probe, url, max(args.seconds - 5.0, 5.0))
                out, _ = load.communicate(timeout=args.seconds + 600)
                sampler.stop()
                load_avg_after = os.getloadavg()
                done = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
                tally, errors = done.get("tally", {}), done.get("errors", {})
        finally:
            stub.terminate()
            stub.wait(timeout=15)

    figures = sampler.at_peak()
    store = sum(figures.get(k) or 0.0 for k in ("result_store_mb", "result_claims_mb", "statements_mb"))
    engine = (figures.get("engine_mb") or 0.0) - engine_idle
    over = sampler.peak - idle
    bound = args.store_mb + args.engine_mb
    report = {
        "benchmark": "mixed_load",
        "sessions": args.sessions,
        "roles": args.roles.split(","),
        "seconds": args.seconds,
        "server_store_mb": args.store_mb,
        "engine_memory_mb": args.engine_mb,
        "bound_mb": bound,
        "idle_rss_mb": round(idle, 1),
        "peak_rss_mb": round(sampler.peak, 1),
        "peak_over_idle_mb": round(over, 1),
        "store_at_peak_mb": round(store, 1),
        "engine_at_peak_mb": round(engine, 1),
        "rest_at_peak_mb": round(over - store - engine, 1),
        "over_bound_mb": round(over - bound, 1),
        "sandboxes_peak_rss_mb": round(sampler.children_peak, 1),
        "idle_client_baseline": summary(baseline),
        "idle_client_under_load": summary(loaded),
        "work": tally,
        "first_error_by_role": errors,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_before": [round(x, 2) for x in load_avg_before],
            "load_avg_after": [round(x, 2) for x in load_avg_after],
        },
    }
    print(
        f"memory: idle {report['idle_rss_mb']} MB, peak {report['peak_rss_mb']} MB, over idle "
        f"{report['peak_over_idle_mb']} MB against a bound of {bound} MB (server_store_mb {args.store_mb} + "
        f"engine_memory_mb {args.engine_mb}): store {report['store_at_peak_mb']}, engine "
        f"{report['engine_at_peak_mb']}, rest {report['rest_at_peak_mb']}; sandboxes (apart) "
        f"{report['sandboxes_peak_rss_mb']} MB"
    )
    print(f"{'idle client':16} {'probes':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>9}")
    for name in ("idle_client_baseline", "idle_client_under_load"):
        row = report[name]
        print(f"{name[12:]:16} {row['probes']:>6} {row['p50_ms']:>8} {row['p95_ms']:>8} {row['max_ms']:>9}")
    print("work done (ok, failed):", tally)
    for role, text in errors.items():
        print(f"  first {role} error: {text[:200]!r}")
    print(
        "load average before/after:",
        report["machine"]["load_avg_before"],
        report["machine"]["load_avg_after"],
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
