"""The knowledge store in the agent (issue 31, 4): verified queries of similar questions and document
passages reach the model once, after the question, marked with who verified them; `flexsql ask
--remember` stores an answered question's SQL as verified, and the next similar question recalls it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from flexsql.server.cli import main as flexsql_main
from flexsql.tools.knowledge.learn import learn_pairs
from flexsql.tools.knowledge.recall import recall
from flexsql.tools.knowledge.store import store_dir
from tests.support.agent_support import Shop, StageScript, ask, requests_for, settings_for, tool_context
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.anyio

SHIPPED_SQL = "SELECT count(*) AS n FROM orders WHERE status = 'shipped'"
PAIRS = [
    ("How many orders have shipped?", SHIPPED_SQL),
    ("Which customers live in Paris?", "SELECT name FROM customers WHERE city = 'Paris'"),
    (
        "What is the total quantity of lamps ordered?",
        "SELECT sum(quantity) FROM order_items WHERE product = 'lamp'",
    ),
]


@pytest.fixture
def empty_store(shop: Shop) -> Iterator[Shop]:
    """The module's shop with no knowledge store, before and after the test."""
    folder = store_dir(shop.sources.get("shop"))
    shutil.rmtree(folder, ignore_errors=True)
    yield shop
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def learned(empty_store: Shop) -> Shop:
    report = learn_pairs(
        empty_store.sources.get("shop"), PAIRS, origin="test-pairs", verified_by="ana@example.org"
    )
    assert report.added == 3, report.text()
    return empty_store


async def test_recalled_queries_follow_the_question_once_with_who_verified_them(learned: Shop) -> None:
    script = StageScript(plans={"count the shipped orders": SHIPPED_SQL})
    with OpenAIStub(script) as stub:
        result = await ask(learned, stub, "How many orders were shipped?", agent={"plans": 1})
    assert result.status == "answered", result.reason
    classify = requests_for(stub, "classify")[0]
    opening = classify.messages[1]["content"]
    question_at = opening.index("Question: How many orders were shipped?")
    recalled_at = opening.index("Verified queries of this database for similar questions")
    assert question_at < recalled_at < opening.index("[classify]")
    assert "How many orders have shipped? (verified by ana@example.org on " in opening
    assert SHIPPED_SQL in opening  # whole
    for req in stub.requests:  # every step reads it, once
        assert req.text.count("How many orders have shipped? (verified by") == 1, req.stage


async def test_without_a_store_nothing_is_added(empty_store: Shop) -> None:
    script = StageScript(plans={"count the shipped orders": SHIPPED_SQL})
    with OpenAIStub(script) as stub:
        result = await ask(empty_store, stub, "How many orders were shipped?", agent={"plans": 1})
    assert result.status == "answered", result.reason
    assert all("Verified queries" not in r.text for r in stub.requests)


def test_flexsql_ask_remember_stores_the_answer_and_recall_finds_it(empty_store: Shop) -> None:
    shop = empty_store
    question = "How many orders are in the shipped state?"
    script = StageScript(plans={"count the shipped orders": SHIPPED_SQL})
    with OpenAIStub(script) as stub:
        args = ["ask", question, "--db", f"shop={shop.url}", "--base-url", stub.base_url]
        args += ["--model", "stub", "--plans", "1", "--json"]
        first = CliRunner().invoke(flexsql_main, [*args, "--remember"])
        again = CliRunner().invoke(flexsql_main, [*args, "--remember"])
        plain = CliRunner().invoke(flexsql_main, args)
    assert first.exit_code == 0, first.output
    answer = json.loads(first.output)
    assert answer["status"] == "answered" and answer["remembered"].startswith("stored as verified")
    assert json.loads(again.output)["remembered"].startswith("already stored")
    assert json.loads(plain.output)["remembered"] is None
    settings = settings_for(stub)
    found = recall(tool_context(shop, settings), "How many orders were shipped?", source="shop", limit=1)
    assert [(q.question, q.sql, q.verified_by) for q in found.queries] == [
        (question, SHIPPED_SQL, "flexsql ask --remember")
    ]
