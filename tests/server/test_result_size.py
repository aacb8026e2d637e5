"""How big one tool result may be on the wire (server/toolkit.py `tool_result`, render.bounded_structured),
through the real SDK client over streamable HTTP: the whole message — structured content, the text and
the JSON-RPC/SSE envelope — stays within [limits] structured_kb (1 MiB: what MCP clients accept in one
SSE event), and a result that does not fit is cut to the rows and cells that fit while still matching
the tool's output schema (the client checks it), with `truncated` set and the text saying so.

Also the server-wide budget of the result stores: sessions draw from one budget, the least recently
used result of any session is evicted first, and a client is told its result was evicted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.support.agent_support import StageScript
from tests.support.mcp_support import http_server, text_of
from tests.support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

MIB = 1024 * 1024
ROWS = 3000
# five columns of 100 characters (as the red-team report), and a wider table with non-ASCII text:
# the SDK's modern transport escapes every non-ASCII character as \\uXXXX (6 bytes), so a byte
# count of the UTF-8 text underestimates the message
NARROW = "SELECT a, b, c, d, e FROM t ORDER BY i"


def make_db(directory: Path) -> str:
    import duckdb

    path = directory / "wide.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(
        "CREATE TABLE t AS SELECT i, "
        + ", ".join(f"repeat('{c}', 100) AS {c}" for c in "abcde")
        + f" FROM range({ROWS}) r(i)"
    )
    conn.execute(
        "CREATE TABLE w AS SELECT i, "
        + ", ".join(f"repeat('é{c}', 200) AS {c}" for c in "abcde")
        + " FROM range(1000) r(i)"
    )
    conn.close()
    return f"duckdb:///{path}"


def wire_bytes(result: Any) -> int:
    """The result as the SDK's transports write it (compact JSON; the modern one escapes non-ASCII)."""
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return max(
        len(json.dumps(body, separators=(",", ":")).encode()),
        len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()),
    )


def assert_cut_to_fit(result: Any, *, first_row: list[Any] | None = None, cap: int = MIB) -> dict[str, Any]:
    """Not an error, within the cap with room for the envelope, cut and saying so."""
    assert not result.is_error, text_of(result)[:500]
    assert wire_bytes(result) <= cap - 512, wire_bytes(result)
    out = result.structured_content
    assert out is not None
    assert "structured content cut" in text_of(result), text_of(result)[-600:]
    if "row_count" in out:
        assert out["truncated"] is True
        assert out["rows"] and out["row_count"] == len(out["rows"])
        if first_row is not None:
            assert out["rows"][0] == first_row  # the first rows stay, whole, in order
    return out


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # SSE sessions (2025) and the stateless transport
async def test_big_results_are_cut_to_fit_the_message_and_keep_the_schema(tmp_path, mode):
    url = make_db(tmp_path)
    with http_server(f"w={url}") as (endpoint, _proc):
        async with Client(endpoint, mode=mode) as client:
            ran = await client.call_tool("run_query", {"sql": NARROW, "max_rows": ROWS})
            out = assert_cut_to_fit(ran, first_row=["a" * 100, "b" * 100, "c" * 100, "d" * 100, "e" * 100])
            assert out["total_rows"] == ROWS and 64 < out["row_count"] < ROWS
            kept = out["row_count"]
            assert f"fetch_rows(result_id={out['result_id']!r}, offset={kept})" in text_of(ran)

            again = await client.call_tool(
                "fetch_rows", {"result_id": out["result_id"], "offset": 0, "limit": ROWS}
            )
            assert assert_cut_to_fit(again)["row_count"] == kept
            rest = await client.call_tool(
                "fetch_rows", {"result_id": out["result_id"], "offset": kept, "limit": ROWS}
            )
            assert not rest.is_error and rest.structured_content["row_count"] == ROWS - kept

            sampled = await client.call_tool("sample_rows", {"table": "w", "limit": 1000})
            assert_cut_to_fit(sampled)

            # one cell just under 1 MiB: the text and the envelope must still fit beside it
            one = await client.call_tool("run_query", {"sql": "SELECT repeat('x', 1048200) AS s"})
            cell = assert_cut_to_fit(one)["rows"][0][0]
            assert cell.startswith("xxxx") and cell.endswith("…") and len(cell) < 1048200
            assert one.structured_content["cells_cut"] == 1

            python = await client.call_tool(
                "run_python",
                {"code": "import pandas as pd\npd.DataFrame({'s': ['é' * 100_000] * 20, 'i': range(20)})"},
            )
            py = assert_cut_to_fit(python)
            assert py["ok"] is True and py["result_id"] and 0 < len(py["rows"]) <= 20

            small = await client.call_tool("run_query", {"sql": "SELECT 1 AS one"})
            assert small.structured_content["rows"] == [[1]] and "cut" not in text_of(small)


def long_sql(k: int) -> str:
    """A count of orders with 180 KB of comment: a model's reply (one program) stays under the
    agent's 200,000-character reply cap, so only several candidates make an answer over 1 MiB."""
    return f"SELECT count(*) AS n FROM orders -- plan {k} " + "padding " * 22_500


async def test_an_ask_answer_with_long_sql_fits(tmp_path):
    """`ask` repeats its SQL in several fields (sql, code, each of eight candidates): 1.8 MB of
    structured content, cut to fit, and still an Answer."""
    from tests.support.agent_support import build_shop

    shop = build_shop(tmp_path)
    script = StageScript(plans={f"count every order, way {k}": long_sql(k) for k in range(8)})
    with OpenAIStub(script) as stub:
        config = tmp_path / "flexsql.toml"
        config.write_text(
            f'[model]\nbase_url = "{stub.base_url}"\nmodel = "stub"\nmax_retries = 1\n'
            "[agent]\nplans = 8\ntool_rounds = 1\nmax_tokens = 100000000\n"
        )
        with http_server(f"shop={shop.url}", extra_args=["--config", str(config)]) as (endpoint, _proc):
            async with Client(endpoint, mode="legacy") as client:
                answer = await client.call_tool("ask", {"question": "How many orders are there?"})
    out = assert_cut_to_fit(answer)
    assert out["status"] == "answered" and out["question"] == "How many orders are there?"
    assert out["rows"] == [[shop.orders]] and len(out["candidates"]) == 8
    assert out["sql"].startswith("SELECT count(*) AS n FROM orders") and out["sql"].endswith("…")


async def test_sessions_share_one_result_budget_and_evict_the_oldest(tmp_path):
    """Three sessions each store a ~6 MB result under a 16 MB server-wide budget: the first session's
    result, the least recently used, is evicted for the third, and its client is told so."""
    import duckdb

    path = tmp_path / "big.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE big AS SELECT i, repeat('z', 200) AS pad FROM range(16000) r(i)")
    conn.close()
    config = tmp_path / "flexsql.toml"
    config.write_text("[limits]\nstore_mb = 16\nserver_store_mb = 16\n")
    sql = "SELECT i, pad FROM big"
    with http_server(f"big=duckdb:///{path}", extra_args=["--config", str(config)]) as (endpoint, _proc):
        async with (
            Client(endpoint, mode="legacy") as a,
            Client(endpoint, mode="legacy") as b,
            Client(endpoint, mode="legacy") as c,
        ):
            first = (await a.call_tool("run_query", {"sql": sql})).structured_content["result_id"]
            second = (await b.call_tool("run_query", {"sql": sql})).structured_content["result_id"]
            await c.call_tool("run_query", {"sql": sql})
            gone = await a.call_tool("fetch_rows", {"result_id": first, "offset": 0, "limit": 1})
            assert gone.is_error and "evicted to save memory" in text_of(gone), text_of(gone)
            kept = await b.call_tool("fetch_rows", {"result_id": second, "offset": 15999, "limit": 1})
            assert not kept.is_error and kept.structured_content["rows"] == [[15999, "z" * 200]]
