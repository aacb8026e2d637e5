"""Session isolation: what one client stores is reachable only by that client.

Three cases users hit: two Claude Code-style (legacy, `mcp-session-id`) HTTP sessions whose result
ids collide; two stateless HTTP clients sharing one store, where result ids are capabilities; and
many ToolContexts in one process (the agent running questions in parallel threads)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest
from mcp import Client

from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.python_tool import RunPython, run_python
from flexsql.tools.query import FetchRows, RunQuery, fetch_rows, run_query
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.results import ResultStore
from tests.support.mcp_support import http_server, text_of

pytestmark = pytest.mark.anyio


@pytest.mark.integration
async def test_legacy_http_sessions_with_colliding_result_ids_see_only_their_own_rows(duck_url):
    with http_server(duck_url) as (url, _proc):
        async with Client(url, mode="legacy") as a, Client(url, mode="legacy") as b:
            qa = await a.call_tool("run_query", {"sql": "SELECT 'from A' AS who, 1 AS n"})
            qb = await b.call_tool("run_query", {"sql": "SELECT 'from B' AS who, 2 AS n"})
            rid_a, rid_b = qa.structured_content["result_id"], qb.structured_content["result_id"]
            assert rid_a == rid_b  # per-session ids restart: the collision this test is about
            code = "df['who'][0]"
            # A's hand-over converts its r1 first; B's run_python over its own r1 must not reuse it
            pa_ = await a.call_tool("run_python", {"code": code, "result_ids": [rid_a]})
            pb_ = await b.call_tool("run_python", {"code": code, "result_ids": [rid_b]})
            assert "from A" in text_of(pa_), text_of(pa_)
            assert "from B" in text_of(pb_) and "from A" not in text_of(pb_), text_of(pb_)
            # and concurrently, both ways round
            results: dict[str, str] = {}

            async def run(name: str, client: Client, rid: str) -> None:
                out = await client.call_tool(
                    "run_python", {"code": "df['who'][0] + '|' + str(int(df['n'][0]))", "result_ids": [rid]}
                )
                results[name] = text_of(out)

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "a", a, rid_a)
                tg.start_soon(run, "b", b, rid_b)
            assert "from A|1" in results["a"] and "from B|2" in results["b"], results


@pytest.mark.integration
async def test_stateless_clients_reach_only_the_results_they_were_given(duck_url):
    with http_server(duck_url) as (url, _proc):
        async with Client(url) as a, Client(url) as b:
            qa = await a.call_tool("run_query", {"sql": "SELECT 'secret of A' AS s"})
            rid_a = qa.structured_content["result_id"]
            # the shared store's ids are capabilities: random, not a counter another client can walk
            assert re.fullmatch(r"r_[A-Za-z0-9_-]{12}", rid_a), rid_a
            qb = await b.call_tool("run_query", {"sql": "SELECT 'mine' AS s"})
            rid_b = qb.structured_content["result_id"]
            assert re.fullmatch(r"r_[A-Za-z0-9_-]{12}", rid_b) and rid_b != rid_a
            for guess in ("r1", "r2", "r_000000000000"):
                out = await b.call_tool("fetch_rows", {"result_id": guess, "offset": 0})
                said = text_of(out)  # an id of the shared store's shape but not its check: another server's
                assert out.is_error and ("unknown" in said or "not given by this flexsql server" in said), (
                    said
                )
                assert rid_a not in text_of(out)  # the error must not list other clients' ids
            own = await b.call_tool("run_python", {"code": "df['s'][0]", "result_ids": [rid_b]})
            assert "mine" in text_of(own) and "secret" not in text_of(own)
            # a capability handed over on purpose works
            shared = await b.call_tool("fetch_rows", {"result_id": rid_a, "offset": 0})
            assert shared.structured_content["rows"] == [["secret of A"]]


@pytest.mark.integration
def test_many_contexts_in_threads_keep_their_results_apart(tmp_path):
    from tests.support.engines import make_duckdb
    from tests.support.sandbox import TEST_SANDBOX

    source = open_source(make_duckdb(tmp_path), name="shop")
    sources = SourceRegistry([source])
    shared_caches: dict = {}  # like the server: catalog-derived caches shared by every context

    def one(i: int) -> tuple[int, list, str]:
        ctx = ToolContext(sources=sources, sandbox=TEST_SANDBOX, results=ResultStore(), caches=shared_caches)
        q = run_query(ctx, RunQuery(sql=f"SELECT {i} AS i, 'ctx{i}' AS tag"))
        assert q.result_id == "r1"  # session-bound stores keep short sequential ids
        py = run_python(ctx, RunPython(code="int(df['i'][0]) * 10", result_ids=[q.result_id]))
        back = fetch_rows(ctx, FetchRows(result_id=q.result_id))
        return i, back.rows, py.value_repr or py.error or ""

    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(one, range(12)))
    for i, rows, value in outcomes:
        assert rows == [[i, f"ctx{i}"]]
        assert value == str(i * 10), (i, value)
