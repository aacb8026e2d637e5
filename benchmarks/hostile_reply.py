"""Does a hostile model reply stall the server for everyone else? One `flexsql serve --http` process;
session A (a client process of its own) calls `ask` over and over while its model answers with a
hostile reply; session B, another client (this process), runs `SELECT 1` every 20 ms and times each
call. The endpoint is a process of its own too, so that building and sending a 2 MB reply costs
session B nothing. Each hostile scenario runs next to its benign baseline (the same model path,
well-behaved replies), in the same run.

Model paths: an OpenAI-compatible endpoint on loopback (configured for the server), and the MCP
client's own model through sampling (no endpoint configured: any client can send any reply).
Hostile replies: `{}`×N (every pair an object the lenient parser could try; the red team's 2 MB reply
cost 64 s of CPU per parse on the event loop, and 0.9 MB through sampling stalled others 9 s), a
reply just under the size cap, and one past it.

    python benchmarks/hostile_reply.py [--seconds 15]

Prints p50/p95/max of session B's latency per scenario and writes benchmarks/results/hostile_reply.json.
The issue's floor: max under 1 s while a hostile reply is parsed.
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
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, types

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from flexsql.config import ModelEndpoint  # noqa: E402
from tests.support.agent_support import StageScript, build_shop  # noqa: E402
from tests.support.hostile_model import braces  # noqa: E402
from tests.support.mcp_support import free_port, server_env  # noqa: E402
from tests.support.openai_stub import OpenAIStub, Reply, StubRequest  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "hostile_reply.json"
CAP = ModelEndpoint().max_reply_bytes
BENIGN = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"})


def endpoint_script(kind: str) -> Callable[[StubRequest], Any]:
    def script(req: StubRequest) -> Any:
        if kind == "benign":
            return BENIGN(req)
        size = {"braces-2MB": 2_000_000, "braces-under-cap": CAP - 4096, "over-cap": CAP + 1}[kind]
        text = braces(size) if kind != "over-cap" else "x" * size
        return Reply(content=text, usage=(1_000, 1_000))  # a real server's counts, not the stub's estimate

    return script


def sampling_answer(kind: str) -> Callable[..., Any]:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        stage = (params.metadata or {}).get("flexsql_stage")
        if kind == "benign":
            reply = BENIGN(
                StubRequest(headers={"x-flexsql-stage": stage}, body=_body(params), stage=stage, run_id="b")
            )
            text = json.dumps(reply) if isinstance(reply, dict) else str(reply)
        else:
            text = braces({"braces-0.9MB": 900_000, "braces-2MB": 2_000_000}[kind])
        return types.CreateMessageResult(
            role="assistant", model="client-llm", content=types.TextContent(type="text", text=text)
        )

    return sample


def _body(params: types.CreateMessageRequestParams) -> dict[str, Any]:
    """The sampling request as an OpenAI body, for the benign script (it reads the user messages)."""
    messages = [
        {"role": m.role, "content": "\n".join(getattr(b, "text", "") for b in m.content_as_list)}
        for m in params.messages
    ]
    return {"messages": messages}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# -- the roles: session A and the endpoint run in processes of their own, so that neither their CPU
# -- (a 2 MB reply built and serialized) nor their GIL is in session B's measurement


def run_stub(kind_file: Path, url_file: Path) -> None:
    """The model endpoint: answers by the scenario named in `kind_file` (read per request)."""

    def script(req: StubRequest) -> Any:
        return endpoint_script(kind_file.read_text().strip())(req)

    with OpenAIStub(script, keep_requests=False) as stub:
        url_file.write_text(stub.base_url)
        while True:
            time.sleep(3600)


async def run_asker(url: str, path: str, kind: str) -> None:
    """Session A: `ask` over and over, printing each answer's status."""
    kwargs: dict[str, Any] = (
        {"mode": "legacy", "sampling_callback": sampling_answer(kind)} if path == "sampling" else {}
    )
    async with Client(url, **kwargs) as client:
        while True:
            result = await client.call_tool("ask", {"question": "How many orders are there?"})
            out = result.structured_content or {}
            print(out.get("status") or result.content[0].text[:60].replace("\n", " "), flush=True)


def start_role(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def stop_role(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


async def probe(url: str, seconds: float) -> list[float]:
    """Session B: SELECT 1 every 20 ms for `seconds`; the latency of each."""
    latencies: list[float] = []
    async with Client(url) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            result = await client.call_tool("run_query", {"sql": "SELECT 1"})
            latencies.append(time.perf_counter() - started)
            assert not result.is_error, result.content[0].text
            await anyio.sleep(0.02)
    return latencies


def scenario(url: str, path: str, kind: str, seconds: float) -> dict[str, Any]:
    asker = start_role("--role", "asker", "--url", url, "--path", path, "--kind", kind)
    try:
        time.sleep(2.0)  # session A's first ask reaches its model
        latencies = anyio.run(probe, url, seconds)
    finally:
        statuses = stop_role(asker).split()
    return {
        "path": path,
        "reply": kind,
        "probes": len(latencies),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p95_ms": round(pct(latencies, 0.95) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "asks_finished": len(statuses),
        "ask_statuses": sorted(set(statuses)),
    }


@contextlib.contextmanager
def http_server(db: str, config: Path, log: Path) -> Iterator[str]:
    """`flexsql serve --http` in a subprocess, its output to `log` (a pipe nobody reads would fill
    up and stall the server mid-benchmark); yields the MCP URL once it accepts connections."""
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
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def server_config(folder: Path, base_url: str | None) -> Path:
    lines = ["[agent]", "plans = 1", "max_seconds = 120.0", ""]
    if base_url:
        lines = ["[model]", f'base_url = "{base_url}"', 'model = "stub"', "max_retries = 0", "", *lines]
    path = folder / ("endpoint.toml" if base_url else "sampling.toml")
    path.write_text("\n".join(lines))
    return path


def warm(url: str, path: str) -> None:
    """Benign asks first, then a pause: the catalog, the search index and the value index are built
    once per server (the value index in the background), and that is not what is measured."""
    asker = start_role("--role", "asker", "--url", url, "--path", path, "--kind", "benign")
    try:
        deadline = time.monotonic() + 120
        assert asker.stdout is not None
        answered = 0
        while time.monotonic() < deadline and answered < 3:
            answered += bool(asker.stdout.readline())
    finally:
        stop_role(asker)
    time.sleep(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0, help="probing time per scenario")
    parser.add_argument("--role", choices=["stub", "asker"], help=argparse.SUPPRESS)
    parser.add_argument("--kind-file", help=argparse.SUPPRESS)
    parser.add_argument("--url-file", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "stub":
        run_stub(Path(args.kind_file), Path(args.url_file))
        return
    if args.role == "asker":
        anyio.run(run_asker, args.url, args.path, args.kind)
        return

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flexsql-hostile-") as tmp:
        folder = Path(tmp)
        os.environ.setdefault("FLEXSQL_CACHE_DIR", str(folder / "cache"))
        shop = build_shop(folder)
        shop.close()
        kind_file, url_file = folder / "kind", folder / "url"
        kind_file.write_text("benign")
        stub = start_role("--role", "stub", "--kind-file", str(kind_file), "--url-file", str(url_file))
        try:
            while not url_file.exists() or not url_file.read_text():
                time.sleep(0.05)
            config = server_config(folder, url_file.read_text())
            with http_server(shop.url, config, folder / "server.log") as url:
                warm(url, "endpoint")
                for kind in ("benign", "braces-2MB", "braces-under-cap", "over-cap"):
                    kind_file.write_text(kind)
                    rows.append(scenario(url, "endpoint", kind, args.seconds))
                    print(rows[-1], flush=True)
        finally:
            stop_role(stub)
        with http_server(shop.url, server_config(folder, None), folder / "server.log") as url:
            warm(url, "sampling")
            for kind in ("benign", "braces-0.9MB", "braces-2MB"):
                rows.append(scenario(url, "sampling", kind, args.seconds))
                print(rows[-1], flush=True)

    print()
    print(f"{'model path':10} {'reply':18} {'probes':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  asks")
    for r in rows:
        print(
            f"{r['path']:10} {r['reply']:18} {r['probes']:>6} {r['p50_ms']:>8} {r['p95_ms']:>8} "
            f"{r['max_ms']:>8}  {r['asks_finished']} {','.join(r['ask_statuses'])}"
        )
    worst = max(r["max_ms"] for r in rows if r["reply"] != "benign")
    print(f"\nworst max latency next to a hostile reply: {worst} ms (floor: under 1000 ms)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "hostile_reply",
                "seconds_per_scenario": args.seconds,
                "max_reply_bytes": CAP,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "scenarios": rows,
                "worst_hostile_max_ms": worst,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
