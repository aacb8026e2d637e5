"""Conversations and clarifications belong to the client that started them (issue 21).

The server keeps the agent's conversations and pending clarifications per principal: the MCP
session on a 2025 (legacy) streamable-HTTP session, the bearer token's identity on stateless
2026-07-28 HTTP — where conversation ids are also minted by the server, so a conversation is
continued only by a client the server gave its id to — and the one local client on stdio.

Real clients: the SDK's `Client` (its default negotiates 2026-07-28, `mode="legacy"` a 2025 session)
over streamable HTTP to `flexsql serve --http` (with and without `--auth-token`) and over stdio; the
model is the scripted OpenAI-compatible stub (tests/support/openai_stub.py), which only knows what
each request shows it, so a client's turn that shows another client's question has read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from tests.support.agent_support import Shop, StageScript, build_shop, question_of, settings_for
from tests.support.mcp_support import (
    ALICE,
    BOB,
    http_client,
    http_server,
    serve_with_two_tokens,
    stdio_params,
    text_of,
)
from tests.support.openai_stub import OpenAIStub, StubRequest

pytestmark = pytest.mark.anyio

A, B = "ALPHA-7731", "BRAVO-4410"  # each client's mark, in every question it asks
TOKEN = "tok-" + "q7" * 14
COUNT_SQL = "SELECT count(*) AS n FROM orders"
AMBIGUOUS = "Which customer is the best?"
CLARIFYING = "Best by number of orders or by amount spent?"
READINGS = ["number of orders", "amount spent"]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    built = build_shop(tmp_path_factory.mktemp("shop"))
    yield built
    built.close()


def classify(req: StubRequest) -> dict[str, Any] | None:
    """Ambiguous when the turn's own question is the ambiguous one (not yet clarified)."""
    question = question_of(req.text)
    if AMBIGUOUS in question and "The user clarified" not in question:
        return {
            "type": "ambiguous",
            "clarifying_question": CLARIFYING,
            "readings": READINGS,
            "reason": None,
            "reply": None,
        }
    return None  # the script's default: answerable


def shop_model() -> StageScript:
    return StageScript(plans={"count every order": COUNT_SQL}, on={"classify": classify})


def seen(stub: OpenAIStub, answer: dict[str, Any]) -> str:
    """Everything the model was shown while answering this turn."""
    texts = [r.text for r in stub.requests if r.run_id == answer["run_id"]]
    assert texts, f"no request of run {answer['run_id']}"
    return "\n".join(texts)


async def ask(client: Client, question: str, conversation_id: str) -> dict[str, Any]:
    result = await client.call_tool("ask", {"question": question, "conversation_id": conversation_id})
    assert not result.is_error, text_of(result)
    out = result.structured_content
    assert out["conversation_id"], out
    assert f"conversation_id: {out['conversation_id']}" in text_of(result)  # the text says how to continue
    return out


def write_config(tmp_path: Path, stub: OpenAIStub, conversations_dir: Path | None) -> Path:
    path = tmp_path / "flexsql.toml"
    text = (
        f'[model]\nbase_url = "{stub.base_url}"\nmodel = "stub"\nmax_retries = 0\n\n'
        "[agent]\nplans = 1\ntool_rounds = 1\nevaluate = false\n"
    )
    if conversations_dir is not None:
        text += f'conversations_dir = "{conversations_dir}"\n'
    path.write_text(text)
    return path


async def two_clients_talk(stub: OpenAIStub, a: Client, b: Client) -> dict[str, dict[str, Any]]:
    """A and B both start a conversation named "shared-conv" and continue it with the id they got
    back; then A asks an ambiguous question in "clarify-me", B sends an answer-like turn to the
    same name, and A answers its own question. Asserts what each turn showed the model."""
    t: dict[str, dict[str, Any]] = {}
    t["a1"] = await ask(a, f"How many orders are there? {A}", "shared-conv")
    t["b1"] = await ask(b, f"How many orders are there? {B}", "shared-conv")
    assert A not in seen(stub, t["b1"])  # B's first turn was not read as a follow-up of A's

    t["a2"] = await ask(a, f"And how many of them shipped? {A}-2", t["a1"]["conversation_id"])
    t["b2"] = await ask(b, f"And how many of them shipped? {B}-2", t["b1"]["conversation_id"])
    # positive control: each client's follow-up carries its own first turn, and only that
    assert f"How many orders are there? {A}" in seen(stub, t["a2"]) and B not in seen(stub, t["a2"])
    assert f"How many orders are there? {B}" in seen(stub, t["b2"]) and A not in seen(stub, t["b2"])

    t["a3"] = await ask(a, f"{AMBIGUOUS} {A}-3", "clarify-me")
    assert t["a3"]["status"] == "needs_clarification" and t["a3"]["clarifying_question"] == CLARIFYING
    t["b3"] = await ask(b, f"by the number of orders {B}-3", "clarify-me")
    b3 = seen(stub, t["b3"])  # B's turn is not taken as the answer to A's pending question
    assert "this message answers it" not in b3 and AMBIGUOUS not in b3 and A not in b3
    t["a4"] = await ask(a, f"by the number of orders {A}-4", t["a3"]["conversation_id"])
    a4 = seen(stub, t["a4"])  # A's own answer is
    assert f"I asked: {CLARIFYING}" in a4 and "this message answers it" in a4 and f"{A}-3" in a4
    assert B not in a4 and t["a4"]["status"] == "answered"
    return t


def files_hold_one_client_each(folder: Path) -> list[Path]:
    files = sorted(folder.rglob("*.json"))
    for path in files:
        text = path.read_text()
        assert not (A in text and B in text), f"{path} mixes both clients' turns:\n{text[:2000]}"
    return files


@pytest.mark.integration
@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "bearer-token"])
@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-stateless", "2025-session"])
async def test_two_http_clients_keep_their_conversations_and_clarifications_apart(
    shop: Shop, tmp_path: Path, mode: str, token: str | None
) -> None:
    folder = tmp_path / "conversations"  # a shared conversations folder on the server
    with OpenAIStub(shop_model()) as stub:
        config = write_config(tmp_path, stub, folder)
        with http_server(shop.url, token=token, extra_args=["--config", str(config)]) as (url, _proc):
            async with http_client(url, token, mode=mode) as a, http_client(url, token, mode=mode) as b:
                turns = await two_clients_talk(stub, a, b)

    ids = {name: turn["conversation_id"] for name, turn in turns.items()}
    if mode == "legacy":  # a session's conversations keep the names its client chose
        assert ids["a1"] == ids["b1"] == "shared-conv" and ids["a3"] == ids["b3"] == "clarify-me"
    else:  # stateless: the server mints each conversation's id; a name never reaches another client's
        assert len({ids["a1"], ids["b1"], ids["a3"], ids["b3"]}) == 4 and "shared-conv" not in ids.values()
        assert all(re.fullmatch(r"conv-[0-9a-f]{32}", i) for i in ids.values()), ids
        assert ids["a2"] == ids["a1"] and ids["b2"] == ids["b1"] and ids["a4"] == ids["a3"]
    files = files_hold_one_client_each(folder)
    assert len(files) == 4, files  # A's and B's two conversations each
    for path in files:
        # per principal: a subfolder named by a keyed hash, never the token or the session id
        assert path.parent.parent == folder and re.fullmatch(r"p-[0-9a-f]{32}", path.parent.name)
        assert token is None or token not in str(path)
    # a folder per session; stateless clients share their token's (or the anonymous) folder, where
    # only the minted ids lead to a conversation
    assert len({p.parent for p in files}) == (2 if mode == "legacy" else 1)


@pytest.mark.integration
async def test_two_stdio_clients_keep_their_conversations_apart(shop: Shop) -> None:
    with OpenAIStub(shop_model()) as stub:
        env = {
            "FLEXSQL_MODEL__BASE_URL": stub.base_url,
            "FLEXSQL_MODEL__MODEL": "stub",
            "FLEXSQL_AGENT__PLANS": "1",
            "FLEXSQL_AGENT__EVALUATE": "false",
        }
        async with Client(stdio_params(shop.url, env=env)) as a, Client(stdio_params(shop.url, env=env)) as b:
            turns = await two_clients_talk(stub, a, b)
    # the one local client keeps the names it chose
    assert {t["conversation_id"] for t in turns.values()} == {"shared-conv", "clarify-me"}


# -- two bearer tokens: principals the server tells apart ------------------------------------------


async def accept(context: Any, params: types.ElicitRequestFormParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": READINGS[0]})


async def test_another_tokens_client_cannot_use_a_conversation_id_or_clarification_it_learned(
    shop: Shop, tmp_path: Path
) -> None:
    """Stateless HTTP with two tokens: Bob, holding Alice's conversation id and her clarification's
    request state (a leak, a shared log), still reads none of her turns and cannot answer her
    question; Alice continues both."""
    with OpenAIStub(shop_model()) as stub:
        settings = settings_for(stub, agent={"plans": 1, "evaluate": False})
        settings.agent.conversations_dir = str(tmp_path / "conversations")
        with serve_with_two_tokens(settings, shop.sources) as url:
            async with (
                http_client(url, ALICE, elicitation_callback=accept) as alice,
                http_client(url, BOB, elicitation_callback=accept) as bob,
            ):
                a1 = await ask(alice, f"How many orders are there? {A}", "alice-conv")
                mark = len(stub.requests)
                b1 = await bob.call_tool(
                    "ask",
                    {
                        "question": f"And how many of them shipped? {B}",
                        "conversation_id": a1["conversation_id"],
                    },
                )
                assert b1.is_error and "names no conversation of this client's" in text_of(b1), text_of(b1)
                assert len(stub.requests) == mark  # refused before the model saw anything
                a2 = await ask(alice, f"And how many of them shipped? {A}-2", a1["conversation_id"])
                assert f"How many orders are there? {A}" in seen(stub, a2) and B not in seen(stub, a2)

                arguments = {"question": f"{AMBIGUOUS} {A}-3", "conversation_id": a1["conversation_id"]}
                asked = await alice.session.call_tool("ask", arguments, allow_input_required=True)
                assert isinstance(asked, types.InputRequiredResult), asked
                answer = {"clarify": types.ElicitResult(action="accept", content={"answer": READINGS[1]})}
                mark = len(stub.requests)
                try:
                    replayed = await bob.call_tool(
                        "ask", arguments, input_responses=answer, request_state=asked.request_state
                    )
                except MCPError as exc:  # refused outright
                    assert "requestState" in str(exc)
                else:  # or answered as a new question of Bob's own, without Alice's turns
                    assert replayed.structured_content["status"] != "answered" or all(
                        "The user clarified" not in r.text and "How many orders" not in r.text
                        for r in stub.requests[mark:]
                    ), text_of(replayed)
                own = await alice.call_tool(
                    "ask", arguments, input_responses=answer, request_state=asked.request_state
                )
    assert not own.is_error, text_of(own)
    out = own.structured_content
    assert out["status"] == "answered" and out["question"] == arguments["question"]
    assert out["conversation_id"] == a1["conversation_id"]
    runs = [r for r in stub.requests if r.run_id == out["run_id"]]
    assert any(f'The user clarified, when asked "{CLARIFYING}": {READINGS[1]}' in r.text for r in runs)
    files = files_hold_one_client_each(tmp_path / "conversations")
    assert len({p.parent for p in files}) == 1  # Alice's token's folder: Bob's refused turn wrote nothing
