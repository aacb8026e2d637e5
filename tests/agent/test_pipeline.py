"""What a model serving the agent's stages reads, request by request (issues 18 and 28), through the
real OpenAI-compatible backend against the loopback stub, over a real DuckDB shop:

- every request asks for exactly one answer format (the stage's JSON object), names only the tools
  it offers, and states K once;
- what a step found is on the thread every later step reads, once (nothing said twice);
- an evaluator is told the sibling candidates' result ids (so compare_results can be used);
- the answer lists the readings and which candidates answer each.
"""

from __future__ import annotations

import re

import pytest

from flexsql.agent.contract import STAGES
from flexsql.tools.toolbox import TOOLS
from tests.support.agent_support import (
    Shop,
    StageScript,
    ask,
    first_user_text,
    plan,
    requests_for,
    tool_reply,
)
from tests.support.openai_stub import OpenAIStub, StubRequest

pytestmark = pytest.mark.anyio

QUESTION = "How many orders were shipped?"
GOOD = "SELECT count(*) AS n FROM orders WHERE status = 'shipped'"
BROKEN = "SELECT count(*) AS n FROM no_such_orders WHERE status = 'shipped'"
REPAIRED = "SELECT count(order_id) AS n FROM orders WHERE status = 'shipped'"
REVISED = "SELECT count(DISTINCT order_id) AS n FROM orders WHERE status = 'shipped'"
# the answer formats the MCP prompts ask clients for: never in an agent request
CLIENT_FORMATS = [
    "STATUS:",
    "VERDICT:",
    "result_id: <",
    "PLAN_PROBLEM",
    "cause: <",
    "wrong: <",
    "Plan N —",
    "```sql or",
    "Write 2–8",
    "Output the intent, the readings, then the plans",
]
TOOL_NAME = re.compile(
    r"\b(" + "|".join(sorted((t.name for t in TOOLS.available(True)), key=len)[::-1]) + r")\b"
)


def _has_tool_results(req: StubRequest) -> bool:
    return any(m.get("role") == "tool" for m in req.messages)


def _classify_with_lookups(req: StubRequest) -> object:
    """A model that looks before it answers, and reports what it found."""
    if not _has_tool_results(req):
        return tool_reply(("describe_table", {"table": "orders"}), ("find_values", {"text": "shipped"}))
    return {
        "type": "answerable",
        "clarifying_question": None,
        "reason": None,
        "reply": None,
        "readings": ["orders with status shipped", "orders ever shipped, returns included"],
        "findings": ["orders.status stores 'shipped' (lower case)"],
    }


def _plans_with_readings(req: StubRequest) -> object:
    return {
        "intent": "What: a count of orders. Who: status shipped.",
        "readings": ["orders with status shipped", "orders ever shipped, returns included"],
        "plans": [
            {**plan("count the shipped orders"), "reading": "orders with status shipped", "rank": 1},
            {
                **plan("count shipped orders from the items side"),
                "reading": "orders ever shipped, returns included",
            },
        ],
        "findings": ["orders.status has 3 values"],
    }


def _full_script() -> StageScript:
    """Every stage occurs: knowledge (a document is given), classify with tool calls, link, plan,
    implement, repair (a broken program), evaluate (a `plan` verdict), revise_plan."""
    script = StageScript(
        plans={"count the shipped orders": GOOD, "count shipped orders from the items side": BROKEN},
        repairs={BROKEN: REPAIRED},
        verdicts={REPAIRED: ("plan", "count from the orders table instead")},
        revisions={
            "count shipped orders from the items side": {
                "reading": "orders ever shipped, returns included",
                "text": "count distinct shipped order ids",
                "tables": ["orders"],
                "program": REVISED,
            }
        },
    )
    script.on["classify"] = _classify_with_lookups
    script.on["plan"] = _plans_with_readings
    return script


async def _run(
    shop: Shop, script: StageScript, python: bool = True, **agent: object
) -> tuple[object, OpenAIStub]:
    with OpenAIStub(script) as stub:
        answer = await ask(
            shop,
            stub,
            QUESTION,
            agent={"plan_concurrency": 1, **agent},
            external_knowledge="Shipped means status = 'shipped'. " * 20,
            python=python,
        )
    return answer, stub


def _rendered(req: StubRequest) -> str:
    """What the request says to the model: its system text and every user message (tool results
    and the model's own replies are the data's words and the model's, not flexsql's)."""
    return "\n".join(str(m.get("content") or "") for m in req.messages if m.get("role") in ("system", "user"))


@pytest.mark.parametrize("python", [True, False])
async def test_every_stage_request_has_one_answer_format_and_names_only_offered_tools(
    shop: Shop, python: bool
) -> None:
    answer, stub = await _run(shop, _full_script(), python=python)
    assert answer.status == "answered", answer.reason
    seen = {r.stage for r in stub.requests}
    assert seen == set(STAGES), f"stages not exercised: {set(STAGES) - seen}"
    for stage in STAGES:
        req = requests_for(stub, stage)[0]
        text = _rendered(req)
        assert text.count("one JSON object") == 1, stage
        for marker in CLIENT_FORMATS:
            assert marker not in text, (stage, marker)
        offered = set(req.tools)
        named = set(TOOL_NAME.findall(text))
        assert named <= offered, f"{stage} names tools it does not offer: {sorted(named - offered)}"
        if not python:
            assert "run_python" not in text and "run_python" not in offered, stage
        assert "<" not in re.sub(r"<[=>]|<-", "", text), f"{stage}: a placeholder such as <grain> is left"
    plan_text = _rendered(requests_for(stub, "plan")[0])
    counts = re.findall(r"\b(\d+)(?:\s*[–-]\s*\d+)?\s+plans\b", plan_text)
    assert counts == ["2"], f"K must be stated once as 2, found {counts}"


async def test_stages_run_knowledge_first_and_later_stages_read_the_summary(shop: Shop) -> None:
    _, stub = await _run(shop, _full_script())
    order = list(dict.fromkeys(r.stage for r in stub.requests))
    assert order[:3] == ["knowledge", "classify", "link"]
    for req in stub.requests[1:]:  # the summary, never the raw document, after the knowledge step
        assert "nothing the question needs" in req.text and "Shipped means status" not in req.text
    knowledge, classify = stub.requests[0], requests_for(stub, "classify")[0]
    # the knowledge step's side request shares the prefix up to the question
    question = f"Question: {QUESTION}"
    assert (
        knowledge.messages[1]["content"].split(question)[0]
        == classify.messages[1]["content"].split(question)[0]
    )


async def test_what_a_step_found_is_read_by_every_later_step_once(shop: Shop) -> None:
    _, stub = await _run(shop, _full_script())
    finding = "orders.status stores 'shipped' (lower case)"  # classify's own words
    spelling = "main.orders.status = 'shipped'"  # what its find_values call showed
    later = [r for r in stub.requests if r.stage not in ("knowledge", "classify")]
    assert later
    for req in later:
        assert req.text.count(finding) == 1, req.stage
        assert req.text.count(spelling) == 1, req.stage
        assert (
            sum("order_date" in m.get("content", "") for m in req.messages if m.get("role") == "tool") == 1
        )  # classify's describe_table, once
    for req in requests_for(stub, "implement"):  # the plan stage's reply reaches the implementers
        assert "orders.status has 3 values" in req.text


async def test_an_evaluator_is_told_the_sibling_candidates_result_ids(shop: Shop) -> None:
    answer, stub = await _run(shop, _full_script())
    first = next(c for c in answer.candidates if c.plan_index == 0)
    assert first.result_id
    later = [first_user_text(r) for r in requests_for(stub, "evaluate")[1:]]
    assert later and all(f"result_id {first.result_id}" in text for text in later)
    assert all("compare_results tells" in text for text in later)
    assert "compare_results" in requests_for(stub, "evaluate")[1].tools
    own = first_user_text(requests_for(stub, "evaluate")[0])
    assert "other candidates" not in own  # the first evaluator has no sibling yet


async def test_the_answer_lists_the_readings_and_the_candidates_of_each(shop: Shop) -> None:
    answer, _ = await _run(shop, _full_script())
    readings = {r.reading: r for r in answer.by_reading}
    assert [r.reading for r in answer.by_reading] == [
        "orders with status shipped",
        "orders ever shipped, returns included",
    ]
    main, other = readings["orders with status shipped"], readings["orders ever shipped, returns included"]
    assert main.rank == 1 and main.candidates and main.chosen
    assert other.rank == 2 and len(other.candidates) >= 2  # the repaired program and the revised plan's
    text = answer.to_text()
    # the returns-included programs returned what the chosen one did: said, not offered as another answer
    assert "readings:" in text and "returns included — the same result: candidates" in text
    assert "if you meant this" not in text
    # flexsql ask prints them too, piped or not
    from rich.console import Console

    from flexsql.server.render_answer import print_answer

    console = Console(record=True, width=200)
    print_answer(answer, console)
    printed = console.export_text()
    assert "orders ever shipped, returns included — the same result" in printed
    assert answer.readings == [main.reading, other.reading]
    revised = next(p for p in answer.plans if p.revised_from is not None)
    assert revised.rank == 2  # a revision keeps its plan's reading rank


async def test_a_long_result_preview_names_no_tool_the_evaluator_lacks(shop: Shop) -> None:
    """300 orders: the preview is cut, and the 'more rows' pointer must not send the evaluator to
    fetch_rows, which evaluate does not offer."""
    script = StageScript(plans={"list every order": "SELECT order_id, status FROM orders ORDER BY order_id"})
    with OpenAIStub(script) as stub:
        answer = await ask(shop, stub, "List all orders", agent={"plans": 1})
    assert answer.status == "answered"
    req = requests_for(stub, "evaluate")[0]
    text = _rendered(req)
    assert "truncated: true" in text
    assert set(TOOL_NAME.findall(text)) <= set(req.tools), set(TOOL_NAME.findall(text)) - set(req.tools)
