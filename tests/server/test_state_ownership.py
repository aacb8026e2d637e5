"""Whose state a request reaches (issue 30, items 1, 7 and 16), through real HTTP clients.

1. A stateless (2026-07-28) request that carries another session's `mcp-session-id` header reaches
   nothing of that session: not its results (fetch_rows, run_python), not its conversations — with
   another client's token, with the session owner's own token, and after the session has ended.
2. Other clients' sessions and stateless requests (64 and more, with made-up session ids) evict none
   of a client's results or conversations; a flood of big results pushes out its sender's own results
   first; a client past [limits] client_sessions is refused, and a session that ends frees its place;
   a result id is never given twice.
3. A handle from another server (a replica behind the same address, or the server before a restart) —
   a stateless result id, a minted conversation id, a 2025 session — fails clearly, never resolving
   to anyone's state; with a shared [agent] conversations_dir the conversation continues there.

The model is the scripted OpenAI-compatible stub, which only knows what each request shows it: a
turn that shows another client's question has read that client's conversation.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from tests.server.test_principals import seen, shop_model, write_config
from tests.support.agent_support import Shop, build_shop, settings_for
from tests.support.mcp_support import (
    ALICE,
    BOB,
    http_client,
    http_server,
    serve_with_two_tokens,
    text_of,
)
from tests.support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

A, B = "ALPHA-7731", "BRAVO-4410"  # each client's mark, in every question it asks
SECRET = "SELECT 'secret of A' AS s"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    built = build_shop(tmp_path_factory.mktemp("shop"))
    yield built
    built.close()


async def ask(client: Client, question: str, conversation_id: str) -> dict[str, Any]:
    result = await client.call_tool("ask", {"question": question, "conversation_id": conversation_id})
    assert not result.is_error, text_of(result)
    return result.structured_content


async def reaches_nothing_of_alice(stub: OpenAIStub, intruder: Client, rid: str) -> None:
    """What a client that is not Alice's session gets for her result id and conversation name."""
    fetched = await intruder.call_tool("fetch_rows", {"result_id": rid, "offset": 0})
    assert fetched.is_error and "secret" not in text_of(fetched), text_of(fetched)
    code = "str(df['s'][0])"
    python = await intruder.call_tool("run_python", {"code": code, "result_ids": [rid]})
    assert python.is_error and "secret" not in text_of(python), text_of(python)
    turn = await ask(intruder, f"And how many of them shipped? {B}", "alice-conv")
    assert A not in seen(stub, turn)  # not read as a follow-up of Alice's turn


async def alice_continues_alone(stub: OpenAIStub, alice: Client, rid: str) -> None:
    """Positive control: Alice's session still holds her result and her conversation, unextended."""
    own = await alice.call_tool("fetch_rows", {"result_id": rid, "offset": 0})
    assert own.structured_content["rows"] == [["secret of A"]], text_of(own)
    turn = await ask(alice, f"And how many of them shipped? {A}-2", "alice-conv")
    shown = seen(stub, turn)
    assert f"How many orders are there? {A}" in shown and B not in shown


async def test_a_stateless_request_naming_a_session_reaches_none_of_it_without_a_token(
    shop: Shop, tmp_path: Path
) -> None:
    """`flexsql serve --http` on loopback: a stateless client sends Alice's session id (learned from a
    log, a proxy) with every request, during her session and after it ended."""
    with OpenAIStub(shop_model()) as stub:
        config = write_config(tmp_path, stub, None)
        with http_server(shop.url, extra_args=["--config", str(config)]) as (url, _proc):
            ids: list[str] = []
            async with http_client(url, session_ids=ids, mode="legacy") as alice:
                rid = (await alice.call_tool("run_query", {"sql": SECRET})).structured_content["result_id"]
                await ask(alice, f"How many orders are there? {A}", "alice-conv")
                assert len(ids) == 1, ids
                async with http_client(url, headers={"mcp-session-id": ids[0]}) as intruder:
                    await reaches_nothing_of_alice(stub, intruder, rid)
                await alice_continues_alone(stub, alice, rid)
            # Alice's session has ended (her client closed it): its id still reaches nothing
            async with http_client(url, headers={"mcp-session-id": ids[0]}) as late:
                await reaches_nothing_of_alice(stub, late, rid)


@pytest.mark.parametrize("token", [BOB, ALICE], ids=["another-token", "the-owners-token"])
async def test_a_stateless_request_naming_a_session_reaches_none_of_it_with_a_token(
    shop: Shop, token: str
) -> None:
    """Two bearer tokens: a stateless request with Alice's session id reaches nothing of her session,
    whether it carries Bob's token or Alice's own (a stateless request belongs to no session)."""
    with OpenAIStub(shop_model()) as stub:
        settings = settings_for(stub, agent={"plans": 1, "evaluate": False, "tool_rounds": 1})
        with serve_with_two_tokens(settings, shop.sources) as url:
            ids: list[str] = []
            async with http_client(url, ALICE, session_ids=ids, mode="legacy") as alice:
                rid = (await alice.call_tool("run_query", {"sql": SECRET})).structured_content["result_id"]
                await ask(alice, f"How many orders are there? {A}", "alice-conv")
                async with http_client(url, token, headers={"mcp-session-id": ids[0]}) as intruder:
                    await reaches_nothing_of_alice(stub, intruder, rid)
                await alice_continues_alone(stub, alice, rid)


async def open_sessions(url: str, count: int, sql: str) -> None:
    """`count` 2025 sessions one after another, each storing a result, then closing."""
    for i in range(count):
        async with Client(url, mode="legacy") as other:
            out = await other.call_tool("run_query", {"sql": f"{sql} -- {i}"})
            assert not out.is_error, text_of(out)


async def stateless_requests(url: str, count: int) -> None:
    """`count` stateless clients, each naming a made-up session id of its own."""
    for _ in range(count):
        async with http_client(url, headers={"mcp-session-id": secrets.token_hex(16)}) as other:
            out = await other.call_tool("run_query", {"sql": "SELECT 'not yours' AS s"})
            assert not out.is_error, text_of(out)


async def test_other_clients_sessions_evict_nothing_and_no_result_id_is_given_twice(
    shop: Shop, tmp_path: Path
) -> None:
    """70 other sessions and 70 stateless requests with random session ids, around Alice's session:
    her result, her conversation and her result ids are as they were (the red team's 64 sessions
    evicted them, and her next result was named r1 again)."""
    with OpenAIStub(shop_model()) as stub:
        config = write_config(tmp_path, stub, None)
        with http_server(shop.url, extra_args=["--config", str(config)]) as (url, _proc):
            async with Client(url, mode="legacy") as alice:
                first = await alice.call_tool("run_query", {"sql": SECRET})
                assert first.structured_content["result_id"] == "r1"
                await ask(alice, f"How many orders are there? {A}", "alice-conv")
                async with anyio.create_task_group() as group:
                    group.start_soon(open_sessions, url, 70, "SELECT 'not yours' AS s")
                    group.start_soon(stateless_requests, url, 70)
                await alice_continues_alone(stub, alice, "r1")
                later = await alice.call_tool("run_query", {"sql": "SELECT 'later' AS s"})
                assert later.structured_content["result_id"] not in ("r1", "r2")  # r2: ask's own query


async def test_a_flood_of_big_results_evicts_its_senders_own_first(tmp_path: Path) -> None:
    """Under a 16 MB budget, Alice keeps one small result while another client's three sessions store
    ~6 MB each: the flood's own older results go, Alice's (the least recently used of all) stays."""
    import duckdb

    path = tmp_path / "big.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE big AS SELECT i, repeat('z', 200) AS pad FROM range(16000) r(i)")
    conn.close()
    config = tmp_path / "flexsql.toml"
    config.write_text("[limits]\nstore_mb = 16\nserver_store_mb = 16\n")
    big = "SELECT i, pad FROM big"
    with http_server(f"big=duckdb:///{path}", extra_args=["--config", str(config)]) as (url, _proc):
        async with Client(url, mode="legacy") as alice, Client(url, mode="legacy") as flood:
            mine = (await alice.call_tool("run_query", {"sql": "SELECT 42 AS n"})).structured_content
            ids = [(await flood.call_tool("run_query", {"sql": big})).structured_content["result_id"]]
            ids.append((await flood.call_tool("run_query", {"sql": big})).structured_content["result_id"])
            ids.append((await flood.call_tool("run_query", {"sql": big})).structured_content["result_id"])
            kept = await alice.call_tool("fetch_rows", {"result_id": mine["result_id"], "offset": 0})
            assert kept.structured_content["rows"] == [[42]], text_of(kept)
            gone = await flood.call_tool("fetch_rows", {"result_id": ids[0], "offset": 0, "limit": 1})
            assert gone.is_error and "evicted to save memory" in text_of(gone), text_of(gone)
            newest = await flood.call_tool("fetch_rows", {"result_id": ids[2], "offset": 15999, "limit": 1})
            assert newest.structured_content["rows"] == [[15999, "z" * 200]], text_of(newest)


async def test_a_client_past_its_sessions_is_refused_and_a_closed_session_frees_its_place(
    shop: Shop,
) -> None:
    """[limits] client_sessions = 2 with two tokens: Bob's third session is refused as busy, saying
    why, while Alice's session works on; when Bob closes one, a new session of his works."""
    with OpenAIStub(shop_model()) as stub:
        settings = settings_for(stub, limits={"client_sessions": 2})
        with serve_with_two_tokens(settings, shop.sources) as url:
            async with (
                http_client(url, ALICE, mode="legacy") as alice,
                http_client(url, BOB, mode="legacy") as bob1,
            ):
                mine = await alice.call_tool("run_query", {"sql": SECRET})
                async with http_client(url, BOB, mode="legacy") as bob2:
                    assert not (await bob1.call_tool("run_query", {"sql": "SELECT 1"})).is_error
                    assert not (await bob2.call_tool("run_query", {"sql": "SELECT 2"})).is_error
                    async with http_client(url, BOB, mode="legacy") as bob3:
                        refused = await bob3.call_tool("run_query", {"sql": "SELECT 3"})
                        assert refused.is_error and text_of(refused).startswith("busy:"), text_of(refused)
                        assert "client_sessions = 2" in text_of(refused)
                    rid = mine.structured_content["result_id"]
                    kept = await alice.call_tool("fetch_rows", {"result_id": rid, "offset": 0})
                    assert kept.structured_content["rows"] == [["secret of A"]]
                # bob2 closed its session: Bob has room for another
                async with http_client(url, BOB, mode="legacy") as bob4:
                    assert not (await bob4.call_tool("run_query", {"sql": "SELECT 4"})).is_error


async def test_handles_from_another_replica_fail_clearly(shop: Shop, tmp_path: Path) -> None:
    """Two replicas of one server: what a client got from one — a stateless result id, a minted
    conversation id, a 2025 session — names nothing on the other, and the other says so."""
    with OpenAIStub(shop_model()) as stub:
        config = write_config(tmp_path, stub, None)
        args = ["--config", str(config)]
        with (
            http_server(shop.url, extra_args=args) as (one, _p1),
            http_server(shop.url, extra_args=args) as (
                two,
                _p2,
            ),
        ):
            ids: list[str] = []
            async with Client(one) as first:
                rid = (await first.call_tool("run_query", {"sql": SECRET})).structured_content["result_id"]
                conv = (await ask(first, f"How many orders are there? {A}", "mine"))["conversation_id"]
                assert re.fullmatch(r"r_[A-Za-z0-9_-]{12}", rid) and re.fullmatch(r"conv-[0-9a-f]{32}", conv)
            async with http_client(one, session_ids=ids, mode="legacy") as session:
                await session.call_tool("run_query", {"sql": SECRET})
            async with Client(two) as second:
                mark = len(stub.requests)
                fetched = await second.call_tool("fetch_rows", {"result_id": rid, "offset": 0})
                assert fetched.is_error and "not given by this flexsql server" in text_of(fetched), text_of(
                    fetched
                )
                continued = await second.call_tool(
                    "ask", {"question": f"And how many shipped? {A}-2", "conversation_id": conv}
                )
                assert continued.is_error and "not given by this flexsql server" in text_of(continued)
                assert len(stub.requests) == mark  # refused before any model call
                # positive control: this replica's own handles work
                own = (await second.call_tool("run_query", {"sql": "SELECT 1 AS n"})).structured_content
                assert not (await second.call_tool("fetch_rows", {"result_id": own["result_id"]})).is_error
            # a 2025 session of replica one, sent to replica two: the SDK answers 404 for it
            headers = {
                "mcp-session-id": ids[0],
                "mcp-protocol-version": "2025-11-25",
                "accept": "application/json, text/event-stream",
            }
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}
            response = httpx.post(two, json=body, headers=headers, timeout=30)
            assert response.status_code == 404 and "Session not found" in response.text


async def test_a_shared_conversations_dir_continues_a_conversation_on_another_replica(
    shop: Shop, tmp_path: Path
) -> None:
    """With [agent] conversations_dir shared by the replicas, a stateless client's conversation
    continues on the other one (the files are the truth); a made-up minted-looking id still fails."""
    with OpenAIStub(shop_model()) as stub:
        config = write_config(tmp_path, stub, tmp_path / "conversations")
        args = ["--config", str(config)]
        with (
            http_server(shop.url, extra_args=args) as (one, _p1),
            http_server(shop.url, extra_args=args) as (
                two,
                _p2,
            ),
        ):
            async with Client(one) as first:
                conv = (await ask(first, f"How many orders are there? {A}", "mine"))["conversation_id"]
            async with Client(two) as second:
                turn = await ask(second, f"And how many of them shipped? {A}-2", conv)
                assert turn["conversation_id"] == conv
                assert f"How many orders are there? {A}" in seen(stub, turn)
