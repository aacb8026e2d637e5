"""Hardening (issue 13, part 3): HTTP off loopback (bind addresses, allowed hosts), cancellation when
an HTTP client goes away, run_python's deadline bounding flexsql.sql(), eval resume and CLI errors,
and polish (config errors, search padding, emoji values, BLOB rendering, fetch_rows in one call)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from engines import make_duckdb
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import http_server, server_env, text_of

from flexsql.config import LimitsConfig, SandboxConfig
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.python_tool import RunPython, run_python
from flexsql.tools.runtime.context import ToolContext

TOKEN = "hardening-token-" + "x" * 24
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def loopback_alias_available() -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.2", 0))
        except OSError:
            return False
    return True


async def count_orders(endpoint: str, token: str | None = TOKEN) -> list[list[int]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(endpoint, http_client=http)) as client:
            result = await client.call_tool("run_query", {"sql": "SELECT count(*) FROM orders"})
            return result.structured_content["rows"]


def past_host_check(answer: httpx2.Response) -> bool:
    """The request reached MCP (a bare tools/list is then refused for want of a session, with 400)."""
    return answer.status_code not in (403, 421)


# -- 1. binding off loopback ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.skipif(not loopback_alias_available(), reason="127.0.0.2 cannot be bound on this machine")
async def test_a_bind_on_another_address_answers_clients_that_use_it(tmp_path):
    """Was: 421 'Invalid Host header' for every request (allowed hosts were the loopback names only)."""
    with http_server(make_duckdb(tmp_path), token=TOKEN, host="127.0.0.2") as (endpoint, _proc):
        assert endpoint.startswith("http://127.0.0.2:")
        assert await count_orders(endpoint) == [[7]]


@pytest.mark.anyio
async def test_a_wildcard_bind_answers_on_the_machines_addresses_and_names(tmp_path):
    """Was: 421 for every request, the only allowed host being the literal 0.0.0.0:PORT."""
    with http_server(make_duckdb(tmp_path), token=TOKEN, host="0.0.0.0") as (endpoint, _proc):
        assert await count_orders(endpoint) == [[7]]  # reached on 127.0.0.1
        port = endpoint.rsplit(":", 1)[1].split("/")[0]
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", **MCP_ACCEPT}) as http:
            # the machine's own name, as a client on the LAN would write it
            by_name = await http.post(
                endpoint, json=LIST_TOOLS, headers={"Host": f"{socket.gethostname()}:{port}"}
            )
            assert past_host_check(by_name), by_name.text
            # DNS rebinding stays refused, and the refusal says how to allow a name
            rebound = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": f"evil.example:{port}"})
            assert rebound.status_code == 421
            assert "evil.example" in rebound.text and "--allowed-host" in rebound.text


@pytest.mark.anyio
async def test_allowed_host_adds_a_name_a_proxy_or_dns_uses(tmp_path):
    extra = ["--allowed-host", "db-tools.internal", "--allowed-host", "mcp.example.org:443"]
    with http_server(make_duckdb(tmp_path), token=TOKEN, host="0.0.0.0", extra_args=extra) as (
        endpoint,
        _proc,
    ):
        port = endpoint.rsplit(":", 1)[1].split("/")[0]
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", **MCP_ACCEPT}) as http:
            for host in (f"db-tools.internal:{port}", "db-tools.internal", "mcp.example.org:443"):
                answer = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": host})
                assert past_host_check(answer), (host, answer.status_code, answer.text)
            wrong_port = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": "mcp.example.org:8443"})
            assert wrong_port.status_code == 421
            origin = await http.post(
                endpoint,
                json=LIST_TOOLS,
                headers={"Host": "db-tools.internal", "Origin": "https://db-tools.internal"},
            )
            assert past_host_check(origin), origin.text
            foreign = await http.post(
                endpoint,
                json=LIST_TOOLS,
                headers={"Host": "db-tools.internal", "Origin": "https://evil.example"},
            )
            assert foreign.status_code == 403


@pytest.mark.anyio
async def test_loopback_without_token_still_refuses_rebinding(tmp_path):
    with http_server(make_duckdb(tmp_path)) as (endpoint, _proc):
        assert await count_orders(endpoint, token=None) == [[7]]
        async with httpx2.AsyncClient(headers=MCP_ACCEPT) as http:
            rebound = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": "evil.example"})
            assert rebound.status_code == 421
            # a wildcard bind's extra names never apply to a loopback bind
            by_name = await http.post(endpoint, json=LIST_TOOLS, headers={"Host": socket.gethostname()})
            assert by_name.status_code == 421 or socket.gethostname() in ("localhost",)


# -- 2. a client that goes away cancels its call ----------------------------------------------------------

CLIENT = """
import sys, anyio
from mcp import Client
async def main(endpoint, mode, tool, arguments):
    async with Client(endpoint, mode=mode) as client:
        print("connected", flush=True)
        await client.call_tool(tool, json.loads(arguments))
import json
anyio.run(main, *sys.argv[1:5])
"""
SLOW = {
    "run_query": {"sql": "SELECT count(*) FROM range(1000000000000)", "timeout_s": 600},
    "run_python": {"code": "x = 0\nwhile True:\n    x += 1", "timeout_s": 600},
}


def tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by `pid` and every process under it (the sandbox's workers)."""

    def stat(p: int | str) -> list[str]:
        return Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()

    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                children.setdefault(int(stat(entry)[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        with contextlib.suppress(OSError):
            fields = stat(current)
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "mode,tool", [("legacy", "run_query"), ("legacy", "run_python"), ("auto", "run_query")]
)
async def test_a_client_that_goes_away_cancels_its_call(tmp_path, mode, tool):
    """Was (2025-era clients, `mode=legacy`): the query or program ran on to its 600 s timeout after
    the client was killed, using a core; the 2026 wire (`auto`) already cancelled."""
    with http_server(make_duckdb(tmp_path)) as (endpoint, proc):
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, endpoint, mode, tool, json.dumps(SLOW[tool])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(),
        )
        try:
            assert client.stdout.readline() == b"connected\n", client.stderr.read().decode()[-2000:]
            await anyio.sleep(3)
            busy = tree_cpu_s(proc.pid)
            await anyio.sleep(1)
            assert tree_cpu_s(proc.pid) - busy > 0.3  # the slow call is running
        finally:
            client.kill()
            client.wait()
        await anyio.sleep(2)  # the disconnect reaches the server, the engine interrupts the query
        before = tree_cpu_s(proc.pid)
        await anyio.sleep(2)
        assert tree_cpu_s(proc.pid) - before < 0.3, (
            "the server is still working on the departed client's call"
        )
        assert await count_orders(endpoint, token=None) == [[7]]
        async with Client(endpoint, mode=mode) as other:
            answer = await other.call_tool("run_python", {"code": "print(6 * 7)", "timeout_s": 20})
            assert "42" in text_of(answer)


# -- 3. run_python's timeout bounds the queries it makes ------------------------------------------------


def test_run_python_timeout_bounds_its_flexsql_sql_queries(tmp_path):
    """Was: timeout_s=2 returned after 31 s — the inner query had the full 30 s query timeout."""
    source = open_source(make_duckdb(tmp_path), name="shop")
    try:
        ctx = ToolContext(
            sources=SourceRegistry([source]),
            limits=LimitsConfig(query_timeout_s=30),
            sandbox=SandboxConfig(timeout_s=20, cpu_s=20, memory_mb=512),
        )
        started = time.monotonic()
        result = run_python(
            ctx, RunPython(code="flexsql.sql('SELECT count(*) FROM range(1000000000000)')", timeout_s=2)
        )
        took = time.monotonic() - started
        assert result.ok is False and "timeout" in result.limits_hit, result.to_text()
        assert "2 s wall-clock limit" in result.to_text()
        assert took < 12, f"run_python(timeout_s=2) took {took:.1f} s"
        # the engine was interrupted, not left running: the source answers at once
        assert source.execute("SELECT count(*) FROM orders").rows == [(7,)]
        # a query that fits in the time left still runs
        fits = run_python(ctx, RunPython(code="len(flexsql.sql('SELECT * FROM orders'))", timeout_s=10))
        assert fits.ok and fits.value_repr == "7", fits.to_text()
    finally:
        source.close()


# -- 4. eval: resume re-runs infrastructure failures; unknown ids and unwritable --out explained ----------


@pytest.fixture
def spider_tasks(tmp_path: Path) -> tuple[Path, Path]:
    from test_evals import QUESTIONS, make_db

    make_db(tmp_path / "dbs" / "concert_singer" / "concert_singer.sqlite")
    tasks = tmp_path / "dev.json"
    tasks.write_text(
        json.dumps([{"db_id": "concert_singer", "question": q, "query": s} for q, s in QUESTIONS])
    )
    return tasks, tmp_path / "dbs"


def run_eval(*args: str | Path) -> tuple[int, str]:
    from click.testing import CliRunner

    from flexsql.evals.cli import eval_command

    result = CliRunner().invoke(eval_command, [str(a) for a in args])
    return result.exit_code, result.output + (
        f"\n{result.exception!r}" if result.exception and not isinstance(result.exception, SystemExit) else ""
    )


def eval_results(out: Path) -> dict[str, dict]:
    return {r["instance_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def test_resume_runs_again_the_tasks_a_wrong_dbs_failed(spider_tasks, tmp_path):
    """Was: the second run (right --dbs) skipped all 5 tasks and kept their 0 scores."""
    tasks, dbs = spider_tasks
    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", empty, "--out", out, "-q")
    assert code == 0, output
    first = eval_results(out)
    assert all(r["score"] == 0 and "not found" in r["reason"] for r in first.values()), first
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "-q")
    assert code == 0, output
    assert "already in" not in output  # nothing was kept from the failed run
    again = eval_results(out)
    assert sorted(again) == ["0", "1", "2", "3", "4"] and all(r["score"] == 1 for r in again.values()), again
    # a task that really ran keeps its result on the next resume
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", out, "-q")
    assert code == 0 and "5 task(s) already in" in output


def test_eval_unknown_ids_is_an_error_naming_them(spider_tasks, tmp_path):
    """Was: 0/0 and exit 0."""
    tasks, dbs = spider_tasks
    code, output = run_eval(
        tasks, "--runner", "gold", "--dbs", dbs, "--out", tmp_path / "out", "--ids", "1,nosuch,zz"
    )
    assert code == 2, output
    assert "nosuch" in output and "zz" in output and "'1'" not in output
    assert not (tmp_path / "out").exists()


def test_eval_unwritable_out_is_a_clear_error(spider_tasks, tmp_path):
    """Was: a PermissionError/FileNotFoundError traceback."""
    tasks, dbs = spider_tasks
    code, output = run_eval(tasks, "--runner", "gold", "--dbs", dbs, "--out", "/proc/x", "-q")
    assert code != 0
    assert "/proc/x" in output and "--out" in output, output
    assert (
        "OSError" not in output and "PermissionError" not in output and "FileNotFoundError" not in output
    ), output


# -- 6. polish ------------------------------------------------------------------------------------------


def flexsql_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-P", "-m", "flexsql.server", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=server_env(env),
        cwd=cwd,
    )


def test_a_bad_flexsql_sources_variable_is_named_as_the_environment_variable(tmp_path):
    """Was: 'cannot read the configuration flexsql.toml: error parsing value for field "sources"…'."""
    proc = flexsql_cli("sources", env={"FLEXSQL_SOURCES": "duckdb:///x.duckdb"}, cwd=tmp_path)
    assert proc.returncode == 2
    assert "environment variable FLEXSQL_SOURCES" in proc.stderr and "JSON" in proc.stderr, proc.stderr
    assert "flexsql.toml" not in proc.stderr


def test_fetch_rows_in_a_fresh_flexsql_call_explains_sessions(tmp_path):
    """Was: 'unknown or was evicted to save memory (kept now: none yet)' in a process that just started."""
    proc = flexsql_cli("call", "fetch_rows", "result_id=r1", "--db", make_duckdb(tmp_path))
    assert proc.returncode == 1
    assert "evicted" not in proc.stderr and "flexsql serve" in proc.stderr and "same call" in proc.stderr, (
        proc.stderr
    )
