"""Acceptance tests of the FlexSQL agent (issue 10): `ask_question` with the real OpenAI-compatible
backend against a real HTTP server on loopback (tests/support/openai_stub.py) whose replies are scripted
from the request it receives, over a real DuckDB database.

Each test asserts what a user would notice: the status, the chosen program and its rows, the
candidates kept, the usage, and the requests the endpoint received.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import anyio
import pytest

from flexsql.agent.contract import STAGES
from tests.support.agent_support import (
    StageScript,
    ask,
    first_user_text,
    plan,
    program,
    requests_for,
    response_schema,
    settings_for,
    tool_context,
    tool_reply,
)
from tests.support.openai_stub import Fail, Hang, OpenAIStub, Reply, StubRequest
from tests.support.processes import steadily

pytestmark = pytest.mark.anyio

COUNT_QUESTION = "How many orders are there?"
SHIPPED_QUESTION = "How many orders were shipped?"


def by_id(answer, candidate_id: str):
    return next(c for c in answer.candidates if c.candidate_id == candidate_id)


def chosen_candidate(answer):
    return next(c for c in answer.candidates if c.result_id == answer.result_id)


# -- 1. the happy path ---------------------------------------------------------------------------

A_SQL = "SELECT count(*) AS n\nFROM orders\n-- every order, one row"
C_BROKEN = "SELECT count(*) AS n FROM orders WHERE order_total > 0"
C_FIXED = "SELECT count(*) AS n FROM orders WHERE order_id > 0"
D_SHIPPED = "SELECT count(*) AS n FROM orders WHERE status = 'shipped'"
D_FEEDBACK = "the question asks for every order, not only the shipped ones"
PLAN_A = "PLAN-A: count the rows of orders"
PLAN_B = "PLAN-B: count the order ids of orders"
PLAN_C = "PLAN-C: count orders with a positive total"
PLAN_D = "PLAN-D: count the shipped orders"
PLAN_D2 = "PLAN-D2: count all orders whatever their status"


async def test_happy_path_k4_reaches_the_right_rows_and_keeps_the_contract(shop):
    """K=4 plans: two agree at once, one is repaired after an error, one is revised after a
    "plan" verdict; every request names its stage and run, the plan schema asks for exactly K,
    and every later request quotes its plan and program verbatim."""
    script = StageScript(
        plans={
            PLAN_A: A_SQL,
            PLAN_B: "SELECT count(order_id) AS n FROM orders",
            PLAN_C: C_BROKEN,
            PLAN_D: D_SHIPPED,
        },
        repairs={C_BROKEN: C_FIXED},
        verdicts={D_SHIPPED: ("plan", D_FEEDBACK)},
        revisions={PLAN_D: {**plan(PLAN_D2), "program": "SELECT sum(1) AS n FROM orders"}},
        usage=(100, 10),
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 4})

    assert result.status == "answered", result.reason
    assert result.rows == [[shop.orders]] and result.columns == ["n"]
    assert result.budget_exhausted is None
    # every program that ran or failed is kept; the broken and the rejected ones too
    codes = [c.code for c in result.candidates]
    assert sorted(codes) == sorted(
        [
            A_SQL,
            "SELECT count(order_id) AS n FROM orders",
            C_BROKEN,
            C_FIXED,
            D_SHIPPED,
            "SELECT sum(1) AS n FROM orders",
        ]
    )
    assert result.sql in {
        A_SQL,
        "SELECT count(order_id) AS n FROM orders",
        C_FIXED,
        "SELECT sum(1) AS n FROM orders",
    }
    assert len(result.groups[0].members) == 4  # the four programs that count every order agree
    assert [p.text for p in result.plans] == [PLAN_A, PLAN_B, PLAN_C, PLAN_D, PLAN_D2]
    assert result.plans[4].revised_from == 3

    # usage: every request the endpoint answered, with the tokens it reported
    assert result.usage.model_calls == len(stub.requests)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (
        100 * len(stub.requests),
        10 * len(stub.requests),
    )
    stages = [r.stage for r in stub.requests]
    assert stages.count("classify") == stages.count("link") == stages.count("plan") == 1
    assert stages.count("implement") == 5 and stages.count("repair") == 1 and stages.count("revise_plan") == 1
    assert stages.count("evaluate") == 5  # every candidate that ran
    for req in stub.requests:
        assert req.stage in STAGES and req.run_id == result.run_id, req.headers

    plan_req = requests_for(stub, "plan")[0]
    assert "Write exactly 4 plans" in first_user_text(plan_req)  # auto: stated, not enforced, with tools
    # vLLM would drop tool calls under a json_schema: only a request that allows none carries it
    assert all(response_schema(r) is None for r in stub.requests if r.body.get("tool_choice") != "none")

    plan_texts = [PLAN_A, PLAN_B, PLAN_C, PLAN_D, PLAN_D2]
    for stage in ("implement", "repair", "evaluate", "revise_plan"):
        for req in requests_for(stub, stage):
            # a request about one plan names that plan last (an evaluator's list of the other
            # candidates comes before), and the plan's text is in the request verbatim
            numbers = re.findall(r"\bplan (\d+)", first_user_text(req).lower())
            assert numbers, (stage, first_user_text(req)[:300])
            number = numbers[-1]
            stated = re.search(rf"(?i)plan {number}(?: of 4)?, reading: [^\n]*\n(.*)", req.text)
            assert stated and stated.group(1) in plan_texts, (stage, req.text[-800:])
    assert PLAN_C in requests_for(stub, "repair")[0].text
    assert PLAN_D in requests_for(stub, "revise_plan")[0].text
    evaluated = {c.code for c in result.candidates if c.result_id}
    assert len(evaluated) == 5
    for code in evaluated:  # multi-line code included: verbatim, not re-rendered
        assert sum(code in first_user_text(r) for r in requests_for(stub, "evaluate")) == 1, code
    repair_req = requests_for(stub, "repair")[0]
    assert C_BROKEN in first_user_text(repair_req) and PLAN_C in repair_req.text
    revise_req = requests_for(stub, "revise_plan")[0]
    assert PLAN_D in revise_req.text and D_FEEDBACK in revise_req.text
    assert PLAN_D2 in first_user_text(requests_for(stub, "implement")[-1])

    # one prefix: every request starts with the same system text and the same tools in one order,
    # then the question; parallel plans share everything up to their own instruction
    first = stub.requests[0]
    for req in stub.requests:
        assert req.messages[0] == first.messages[0] and req.body["tools"] == first.body["tools"]
        assert req.messages[1]["content"].startswith(first.messages[1]["content"][:200])
    implements = requests_for(stub, "implement")[:4]
    plan_reply = requests_for(stub, "plan")[0].messages
    for req in implements:
        assert req.messages[: len(plan_reply)] == plan_reply


async def test_json_schema_mode_sends_each_stage_schema_with_the_tools(shop):
    """response_format = "json_schema" (endpoints that combine structured outputs and tools):
    the plan request itself asks for exactly K plans; under "auto" only tool-less requests do."""
    script = StageScript(
        plans={
            "count every order": "SELECT count(*) AS n FROM orders",
            "count every order id": "SELECT count(order_id) AS n FROM orders",
        }
    )
    with OpenAIStub(script) as stub:
        result = await ask(
            shop, stub, COUNT_QUESTION, agent={"plans": 2}, model={"response_format": "json_schema"}
        )
    assert result.status == "answered", result.reason
    (plan_req,) = requests_for(stub, "plan")
    assert plan_req.tools
    plans_schema = response_schema(plan_req)["properties"]["plans"]
    assert plans_schema["minItems"] == plans_schema["maxItems"] == 2
    for req in stub.requests:
        assert response_schema(req) is not None and req.tools, req.stage


# -- 2. tool calls inside a stage ------------------------------------------------------------------


async def test_link_stage_tool_loop_sees_real_search_and_describe_results(shop):
    def link(req: StubRequest):
        results = req.tool_results
        if not results:
            return tool_reply(("search_schema", {"query": "products ordered quantity"}))
        if len(results) == 1:
            return tool_reply(("describe_table", {"table": "order_items"}))
        return None  # the default answer

    script = StageScript(
        plans={"sum the quantity of every order item": "SELECT sum(quantity) AS units FROM order_items"},
        link_tables=["order_items"],
        on={"link": link},
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, "How many units were ordered in total?", agent={"plans": 1})

    assert result.status == "answered", result.reason
    links = requests_for(stub, "link")
    assert len(links) == 3
    search_text, describe_text = links[2].tool_results
    assert links[1].tool_results == [search_text]
    assert "order_items" in search_text
    for column in ("item_id", "order_id", "product", "quantity", "price"):
        assert column in describe_text, describe_text
    assert "orders" in describe_text  # the foreign key to orders
    # the assistant's tool calls are echoed with their ids, each answered by a tool message
    call = links[2].messages[-2]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "describe_table"
    assert links[2].messages[-1] == {
        "role": "tool",
        "tool_call_id": call["tool_calls"][0]["id"],
        "content": describe_text,
    }
    assert result.usage.tool_calls == 2
    # what linking found reaches the plan step: it is on the thread the plan request carries
    assert "order_items" in requests_for(stub, "plan")[0].text


# -- 3. code-level repair --------------------------------------------------------------------------


async def test_sql_error_is_repaired_and_both_programs_stay_candidates(shop):
    broken = "SELECT count(*) AS n FROM orders WHERE state = 'shipped'"
    fixed = "SELECT count(*) AS n FROM orders WHERE status = 'shipped'"
    text = "count the orders whose status is shipped"
    script = StageScript(plans={text: broken}, repairs={broken: fixed})
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, SHIPPED_QUESTION, agent={"plans": 1})

    assert result.status == "answered", result.reason
    assert result.sql == fixed and result.rows == [[shop.shipped]]
    failed, repaired = result.candidates
    assert failed.code == broken and failed.error and failed.result_id is None
    assert "state" in failed.error  # the engine's complaint names the missing column
    assert repaired.repaired_from == failed.candidate_id and repaired.error is None
    (repair_req,) = requests_for(stub, "repair")
    prompt = first_user_text(repair_req)
    assert broken in prompt and text in repair_req.text
    assert failed.error.splitlines()[0] in prompt  # the error text reaches the model
    assert [g.members for g in result.groups] == [[repaired.candidate_id], [failed.candidate_id]]


async def test_repairs_that_keep_failing_end_in_a_clear_failure(shop):
    attempts = [f"SELECT count(*) AS n FROM orders WHERE missing_{i} = 1" for i in range(4)]
    script = StageScript(
        plans={"count the orders": attempts[0]}, repairs={attempts[i]: attempts[i + 1] for i in range(3)}
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 1})
    assert result.status == "failed"
    assert [c.code for c in result.candidates] == attempts  # the first try and code_repairs=3 repairs
    assert all(c.error for c in result.candidates)
    assert "missing_3" in result.reason  # the last error, so the user sees why
    assert len(requests_for(stub, "repair")) == 3 and not requests_for(stub, "evaluate")


# -- 4. plan-level revision ------------------------------------------------------------------------


async def test_plan_verdict_revises_the_plan_and_adds_a_candidate(shop):
    first, revised = "count every order", "count only the orders whose status is shipped"
    everything, shipped_sql = "SELECT count(*) AS n FROM orders", D_SHIPPED
    feedback = "the question asks about shipped orders; this counts all of them"
    script = StageScript(
        plans={first: everything},
        verdicts={everything: ("plan", feedback)},
        revisions={first: {**plan(revised, reading="shipped only"), "program": shipped_sql}},
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, SHIPPED_QUESTION, agent={"plans": 1})

    assert result.status == "answered", result.reason
    assert result.sql == shipped_sql and result.rows == [[shop.shipped]]
    assert [(p.text, p.revised_from) for p in result.plans] == [(first, None), (revised, 0)]
    old, new = result.candidates
    assert (old.code, old.verdicts, old.feedback) == (everything, ["plan"], [feedback])
    assert (new.code, new.plan_index, new.verdicts) == (shipped_sql, 1, ["ok"])
    (revise_req,) = requests_for(stub, "revise_plan")
    assert first in revise_req.text and feedback in revise_req.text and everything in revise_req.text
    implements = requests_for(stub, "implement")
    assert len(implements) == 2 and revised in first_user_text(implements[1])


# -- 5. a Python implementation ------------------------------------------------------------------

PY_CODE = (
    "df = flexsql.sql('SELECT city, customer_id FROM customers')\n"
    "df.groupby('city', as_index=False).agg(customers=('customer_id', 'count'))"
    ".sort_values('city').reset_index(drop=True)"
)
SQL_CODE = "SELECT city, count(*) AS customers FROM customers GROUP BY city ORDER BY city"


@pytest.mark.integration
async def test_python_program_runs_in_the_sandbox_and_agrees_with_sql(shop):
    script = StageScript(
        plans={
            "pandas: group the customers by city": program(PY_CODE, "python"),
            "sql: group the customers by city": SQL_CODE,
        },
        link_tables=["customers"],
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, "How many customers are there in each city?", agent={"plans": 2})

    assert result.status == "answered", result.reason
    python = next(c for c in result.candidates if c.language == "python")
    assert python.code == PY_CODE and python.error is None and python.result_id
    assert python.rows == 5
    (group,) = [g for g in result.groups if g.result_id]
    assert len(group.members) == 2 and "SQL and Python agree" in group.reasons
    assert result.rows == [[city, 8] for city in sorted(["Paris", "Lyon", "Berlin", "Madrid", "Rome"])]
    assert any(PY_CODE in first_user_text(r) for r in requests_for(stub, "evaluate"))


@pytest.mark.integration
async def test_python_only_answer_reports_language_python(shop):
    script = StageScript(
        plans={"pandas: group the customers by city": program(PY_CODE, "python")}, link_tables=["customers"]
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, "How many customers are there in each city?", agent={"plans": 1})
    assert result.status == "answered", result.reason
    assert (result.language, result.code, result.sql) == ("python", PY_CODE, None)
    assert result.rows[0] == ["Berlin", 8] and result.total_rows == 5


# -- 6. selection ---------------------------------------------------------------------------------

# plan_concurrency=1: candidates arrive in plan order, so the first candidate — the one a
# position tie-break would pick — is the wrong one in each case.


async def test_agreeing_majority_beats_a_lone_outlier(shop):
    outlier = "SELECT count(*) AS n FROM orders WHERE status <> 'cancelled'"
    script = StageScript(
        plans={
            "count orders that were not cancelled": outlier,
            "count orders with status shipped": D_SHIPPED,
            "count order ids with status shipped": "SELECT count(order_id) AS n FROM orders WHERE status IN ('shipped')",
        }
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, SHIPPED_QUESTION, agent={"plans": 3, "plan_concurrency": 1})
    assert result.status == "answered", result.reason
    assert result.rows == [[shop.shipped]] and result.sql != outlier
    assert len(result.groups[0].members) == 2
    assert by_id(result, result.groups[1].members[0]).code == outlier


async def test_non_empty_result_beats_an_empty_one(shop):
    empty = "SELECT name FROM customers WHERE city = 'paris' ORDER BY name"  # the stored spelling is Paris
    script = StageScript(
        plans={
            "customers whose city is paris, lower case": empty,
            "customers whose city is Paris": "SELECT name FROM customers WHERE city = 'Paris' ORDER BY name",
        },
        link_tables=["customers"],
    )
    with OpenAIStub(script) as stub:
        result = await ask(
            shop, stub, "Which customers live in Paris?", agent={"plans": 2, "plan_concurrency": 1}
        )
    assert result.status == "answered", result.reason
    assert result.rows == [[name] for name in shop.paris_customers]
    assert result.candidates[0].code == empty and result.candidates[0].rows == 0
    assert "empty result" in result.groups[1].reasons


async def test_evaluator_verdict_breaks_a_tie_between_equal_groups(shop):
    pending = "SELECT count(*) AS n FROM orders WHERE status = 'pending'"
    script = StageScript(
        plans={"count pending orders": pending, "count shipped orders": D_SHIPPED},
        verdicts={pending: ("implementation", "pending orders were not shipped")},
    )
    with OpenAIStub(script) as stub:
        result = await ask(
            shop, stub, SHIPPED_QUESTION, agent={"plans": 2, "plan_concurrency": 1, "plan_revisions": 0}
        )
    assert result.status == "answered", result.reason
    assert result.sql == D_SHIPPED and result.rows == [[shop.shipped]]
    assert [len(g.members) for g in result.groups] == [1, 1]
    assert result.candidates[0].code == pending and result.candidates[0].verdicts == ["implementation"]
    assert not requests_for(stub, "repair")  # no revision rounds were allowed


# -- 7. malformed model output -------------------------------------------------------------------


def corrected(req: StubRequest) -> bool:
    return "could not be used" in req.last_user_text


async def test_broken_json_is_corrected_with_the_schema(shop):
    broken = '{"plans": [{"reading": "all orders", "text": "count every'
    script = StageScript(
        plans={
            "count every order": "SELECT count(*) AS n FROM orders",
            "count every order id": "SELECT count(order_id) AS n FROM orders",
        },
        on={"plan": lambda req: None if corrected(req) else Reply(content=broken)},
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 2})
    assert result.status == "answered", result.reason
    assert result.rows == [[shop.orders]]
    first, second = requests_for(stub, "plan")
    assert second.messages[-2] == {"role": "assistant", "content": broken}
    assert "no JSON object" in second.last_user_text
    # the correction allows no tool call (the tools stay listed: the prompt's prefix is unchanged), so
    # guided decoding can hold the model to exactly K plans
    assert (first.body["tool_choice"], second.body["tool_choice"]) == ("auto", "none")
    assert second.tools == first.tools
    plans_schema = response_schema(second)["properties"]["plans"]
    assert plans_schema["minItems"] == plans_schema["maxItems"] == 2


async def test_tool_rounds_are_bounded_then_the_answer_is_demanded_with_the_schema(shop):
    def link(req: StubRequest):
        return (
            tool_reply(("describe_table", {"table": "orders"})) if req.body["tool_choice"] == "auto" else None
        )

    script = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"}, on={"link": link})
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 1, "tool_rounds": 2})
    assert result.status == "answered", result.reason
    links = requests_for(stub, "link")
    assert [r.body["tool_choice"] for r in links] == ["auto", "auto", "none"]
    assert all(r.tools == links[0].tools for r in links)
    first, repeated = links[2].tool_results
    assert "customer_id" in first and repeated.startswith("(the same call as before")
    assert "tool budget of this step is spent" in links[2].last_user_text
    assert response_schema(links[2])["required"] == ["tables"]
    assert result.usage.tool_calls == 1  # the repeated call was not run again


async def test_unknown_tool_and_bad_arguments_get_clear_tool_messages_and_the_stage_goes_on(shop):
    def link(req: StubRequest):
        if req.has_tool_results:
            return None
        return tool_reply(
            ("query_database", {"sql": "SELECT 1"}),
            ("describe_table", '{"table": '),
            ("describe_table", {"tabel": "orders"}),
            ("run_query", {"sql": "SELECT 1"}),
        )

    script = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"}, on={"link": link})
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 1})
    assert result.status == "answered", result.reason
    unknown, broken, misnamed, elsewhere = requests_for(stub, "link")[1].tool_results
    assert unknown.startswith("not_found:") and "'query_database'" in unknown
    assert "describe_table" in unknown and "search_schema" in unknown  # what it may call instead
    assert broken.startswith("invalid_argument:") and "not a JSON object" in broken
    assert (
        misnamed.startswith("invalid_argument:")
        and "'tabel'" in misnamed
        and "table (str, required)" in misnamed
    )
    assert elsewhere.startswith("r1: 1 rows")  # any step may look at the data


async def test_hallucinated_tables_are_dropped_and_reported(shop):
    def plans(req: StubRequest):
        return {"plans": [plan("count every order", tables=["orders", "invoices"])]}

    script = StageScript(
        plans={"count every order": "SELECT count(*) AS n FROM orders"},
        link_tables=["orders", "invoices"],
        on={"plan": plans},
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 1})
    assert result.status == "answered", result.reason
    assert result.rows == [[shop.orders]]
    assert result.plans[0].tables == ["main.orders"]
    plan_prompt = first_user_text(requests_for(stub, "plan")[0])
    assert "not in the catalog: invoices" in plan_prompt


async def test_reply_missing_required_fields_three_times_fails_clearly(shop):
    script = StageScript(plans={}, on={"plan": lambda req: {"plans": [{"reading": "all orders"}]}})
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 2})
    assert result.status == "failed"
    assert "stage plan" in result.reason and "after 3 tries" in result.reason
    assert "text" in result.reason  # which field was missing
    assert len(requests_for(stub, "plan")) == 3 and not requests_for(stub, "implement")
    assert result.candidates == [] and result.sql is None


# -- 8. endpoint failures ------------------------------------------------------------------------


class Sequence:
    """The first replies from a list, then the script; thread-safe (plans run concurrently)."""

    def __init__(self, first: list, then) -> None:
        self.first, self.then, self.lock = list(first), then, threading.Lock()

    def __call__(self, req: StubRequest):
        with self.lock:
            if self.first:
                return self.first.pop(0)
        return self.then(req)


async def test_429_then_500_are_retried_and_answered(shop):
    script = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"})
    with OpenAIStub(Sequence([Fail(429, headers={"Retry-After": "0"}), Fail(500)], script)) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 1}, model={"max_retries": 2})
    assert result.status == "answered", result.reason
    assert result.rows == [[shop.orders]]
    assert [r.stage for r in stub.requests[:4]] == ["classify"] * 3 + ["link"]
    assert stub.requests[0].body == stub.requests[2].body  # the same request, sent again
    assert result.usage.model_calls == len(stub.requests) - 2  # failed attempts are not answers


async def test_a_timeout_is_retried_and_answered(shop):
    script = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"})
    with OpenAIStub(Sequence([Hang(3)], script)) as stub:
        result = await ask(
            shop, stub, COUNT_QUESTION, agent={"plans": 1}, model={"max_retries": 1, "timeout_s": 0.5}
        )
    assert result.status == "answered", result.reason
    assert [r.stage for r in stub.requests[:3]] == ["classify", "classify", "link"]


async def test_persistent_500_fails_with_a_model_error(shop):
    with OpenAIStub(lambda req: Fail(500, message="upstream exploded")) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, model={"max_retries": 1})
    assert result.status == "failed"
    assert result.reason.startswith("model_error:")
    assert (
        "HTTP 500" in result.reason
        and "upstream exploded" in result.reason
        and "2 attempt(s)" in result.reason
    )
    assert [r.stage for r in stub.requests] == ["classify", "classify", "link", "link"]
    assert result.candidates == [] and result.usage.model_calls == 0


@pytest.mark.integration
async def test_hang_past_timeout_fails_with_a_model_error(shop):
    with OpenAIStub(lambda req: Hang(5)) as stub:
        started = time.monotonic()
        result = await ask(shop, stub, COUNT_QUESTION, model={"max_retries": 0, "timeout_s": 0.5})
        elapsed = time.monotonic() - started
    assert result.status == "failed"
    assert result.reason.startswith("model_error:") and "did not answer within 0.5 s" in result.reason
    assert [r.stage for r in stub.requests] == ["classify", "link"]
    assert elapsed < 4.5  # the hang is cut at timeout_s, not waited out


# -- 9. the budget -------------------------------------------------------------------------------

FOUR_PLANS = {
    f"count every order, method {i}": f"SELECT count(*) + {i} - {i} AS n FROM orders" for i in range(4)
}


async def test_budget_of_model_calls_answers_the_best_candidate_so_far(shop):
    script = StageScript(plans=FOUR_PLANS)
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 4, "max_model_calls": 6})
    assert result.status == "answered", result.reason
    assert result.budget_exhausted == "6 model calls"
    assert len(stub.requests) == 6 and result.usage.model_calls == 6
    assert [r.stage for r in stub.requests].count("implement") == 3
    assert result.rows == [[shop.orders]] and len(result.candidates) == 3
    assert "budget spent: 6 model calls" in result.to_text()


async def test_budget_spent_before_any_candidate_fails(shop):
    script = StageScript(plans=FOUR_PLANS)
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 4, "max_model_calls": 2})
    assert result.status == "failed"
    assert result.budget_exhausted == "2 model calls"
    assert "budget" in result.reason and "max_model_calls" in result.reason
    assert [r.stage for r in stub.requests] == ["classify", "link"]


@pytest.mark.integration
async def test_time_budget_answers_with_the_candidate_that_finished(shop):
    slow_plan = "count every order id, slowly"
    script = StageScript(
        plans={
            "count every order": "SELECT count(*) AS n FROM orders",
            slow_plan: "SELECT count(order_id) AS n FROM orders",
        },
        on={"implement": lambda req: Hang(30) if slow_plan in first_user_text(req) else None},
    )
    with OpenAIStub(script) as stub:
        started = time.monotonic()
        result = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 2, "max_seconds": 2.0})
        elapsed = time.monotonic() - started
        sent = len(stub.requests)
        await anyio.sleep(0.5)
        assert len(stub.requests) == sent
    assert result.status == "answered", result.reason
    assert result.budget_exhausted == "2 s" and result.rows == [[shop.orders]]
    assert [c.code for c in result.candidates] == ["SELECT count(*) AS n FROM orders"]
    assert elapsed < 5


# -- 10. cancellation ----------------------------------------------------------------------------


async def _cancel_after(seconds: float, coro_fn) -> float:
    started = time.monotonic()
    with anyio.move_on_after(seconds) as scope:
        await coro_fn()
    assert scope.cancelled_caught, "the run finished before it was cancelled"
    return time.monotonic() - started


@pytest.mark.integration
async def test_cancelling_while_the_model_hangs_stops_model_calls(shop):
    script = StageScript(
        plans={
            "count every order": "SELECT count(*) AS n FROM orders",
            "count every order id": "SELECT count(order_id) AS n FROM orders",
        },
        on={"implement": lambda req: Hang(30)},
    )
    with OpenAIStub(script) as stub:
        elapsed = await _cancel_after(1.5, lambda: ask(shop, stub, COUNT_QUESTION, agent={"plans": 2}))
        sent = len(stub.requests)
        await anyio.sleep(1.0)
        assert len(stub.requests) == sent  # nothing after the cancellation
    assert elapsed < 4
    assert [r.stage for r in stub.requests] == ["classify", "link", "plan", "implement", "implement"]


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads thread states from /proc")
async def test_cancelling_while_a_slow_query_runs_stops_the_query(shop):
    slow = "SELECT count(*) AS n FROM range(1000000000000)"  # hours of work, unless interrupted
    script = StageScript(plans={"count a very long range": slow})
    with OpenAIStub(script) as stub:
        elapsed = await _cancel_after(
            2.0, lambda: ask(shop, stub, COUNT_QUESTION, agent={"plans": 1}, limits={"query_timeout_s": 60})
        )
        sent = len(stub.requests)
        # an engine still counting keeps a thread of this process running; a stopped one goes idle
        stopped = await steadily(os.getpid(), busy=False)
        assert len(stub.requests) == sent
    assert elapsed < 5
    assert [r.stage for r in stub.requests] == ["classify", "link", "plan", "implement"]
    assert stopped, "the query went on after the cancellation"


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads thread states from /proc")
async def test_cancelling_while_a_python_program_runs_kills_it(shop):
    spin = "n = 0\nwhile True:\n    n += 1\n"
    script = StageScript(plans={"count forever in pandas": program(spin, "python")})
    with OpenAIStub(script) as stub:
        elapsed = await _cancel_after(3.0, lambda: ask(shop, stub, COUNT_QUESTION, agent={"plans": 1}))
        # the kill goes through the sandbox's template process; a program left running keeps a thread
        # of a process under this one running
        stopped = await steadily(os.getpid(), busy=False, itself=False)
    assert elapsed < 6
    assert [r.stage for r in stub.requests] == ["classify", "link", "plan", "implement"]
    assert stopped, "the Python program went on after the cancellation"


# -- 11. the API key -----------------------------------------------------------------------------

SECRET = "sk-flexsql-agent-SECRET-5b1e77d0c3"
KEY_ENV = "FLEXSQL_TEST_AGENT_KEY"


async def test_api_key_reaches_the_endpoint_and_nothing_else(shop, tmp_path: Path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    # a server that echoes the key back (in reasoning, say) must not get it into the trace either
    script = StageScript(
        plans={"count every order": "SELECT count(*) AS n FROM orders"},
        on={
            "classify": lambda req: Reply(
                content={"type": "answerable"}, reasoning=f"the caller's key is {SECRET}"
            )
        },
    )
    trace = tmp_path / "trace.jsonl"
    with OpenAIStub(script) as stub:
        result = await ask(
            shop, stub, COUNT_QUESTION, agent={"plans": 1}, model={"api_key_env": KEY_ENV}, trace_path=trace
        )
    assert result.status == "answered", result.reason
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in stub.requests)
    assert SECRET not in result.model_dump_json() and SECRET not in result.to_text()
    lines = trace.read_text().splitlines()
    assert len(lines) > 10 and all(json.loads(line)["run"] == result.run_id for line in lines)
    assert SECRET not in trace.read_text()
    assert any("the caller's key is ***" in line for line in lines)


async def test_api_key_echoed_in_an_error_stays_out_of_the_answer(shop, tmp_path: Path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    refused = Fail(401, message=f"Incorrect API key provided: {SECRET}. You can find your API key at …")
    trace = tmp_path / "trace.jsonl"
    with OpenAIStub(lambda req: refused) as stub:
        result = await ask(shop, stub, COUNT_QUESTION, model={"api_key_env": KEY_ENV}, trace_path=trace)
    assert result.status == "failed"
    assert "HTTP 401" in result.reason and KEY_ENV in result.reason  # where the key is read from
    assert SECRET not in result.model_dump_json()
    assert SECRET not in trace.read_text() and "HTTP 401" in trace.read_text()
    assert stub.requests and all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in stub.requests)


# -- questions that are not answered with SQL, and conversations --------------------------------


@pytest.mark.parametrize(
    "kind, expected",
    [
        (
            {
                "type": "ambiguous",
                "clarifying_question": "Shipped or ordered in 2024?",
                "reason": None,
                "reply": None,
                "readings": ["shipped in 2024", "ordered in 2024"],
            },
            {
                "status": "needs_clarification",
                "clarifying_question": "Shipped or ordered in 2024?",
                "readings": ["shipped in 2024", "ordered in 2024"],
            },
        ),
        (
            {
                "type": "unanswerable",
                "clarifying_question": None,
                "reason": "there are no delivery dates",
                "reply": None,
            },
            {"status": "unanswerable", "reason": "there are no delivery dates"},
        ),
        (
            {
                "type": "improper",
                "clarifying_question": None,
                "reason": None,
                "reply": "Hello! Ask me about orders.",
            },
            {"status": "reply", "reply": "Hello! Ask me about orders."},
        ),
    ],
)
async def test_classify_outcomes_end_the_run_after_one_request(shop, kind, expected):
    script = StageScript(plans={}, on={"classify": lambda req: kind})
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, "How many orders in 2024?")
    assert result.model_dump(include=set(expected)) == expected
    assert [r.stage for r in stub.requests] == ["classify"] and result.candidates == []


async def test_follow_up_turn_sees_the_earlier_question_and_sql_in_every_stage(shop):
    first_sql = "SELECT count(*) AS n FROM orders"
    script = StageScript(plans={"count every order": first_sql})
    with OpenAIStub(script) as stub:
        session = tool_context(shop, settings_for(stub))  # one client: its conversations live with it
        one = await ask(shop, stub, COUNT_QUESTION, agent={"plans": 1}, tools=session, conversation_id="c1")
        sent = len(stub.requests)
        script.plans = {"count the shipped orders": D_SHIPPED}
        two = await ask(
            shop,
            stub,
            "And how many of them were shipped?",
            agent={"plans": 1},
            tools=session,
            conversation_id="c1",
        )
    assert (one.status, two.status) == ("answered", "answered")
    assert two.sql == D_SHIPPED and two.rows == [[shop.shipped]] and two.conversation_id == "c1"
    assert all(r.messages[1]["content"].count("Question:") == 1 for r in stub.requests[:sent])
    later = stub.requests[sent:]
    assert {r.stage for r in later} == {"classify", "link", "plan", "implement", "evaluate"}
    opening = stub.requests[0].messages[1]["content"].split("\n\n[classify]")[0]
    for req in later:  # the earlier turn as a user/assistant pair, the same opening as its requests
        earlier, account = req.messages[1], req.messages[2]
        assert earlier == {"role": "user", "content": opening}, req.stage
        assert account["role"] == "assistant" and f"SQL: {first_sql}" in account["content"]


async def test_an_answer_left_in_the_reasoning_with_empty_content_is_used(shop):
    """Qwen3 behind vLLM's reasoning parser can put the whole answer in `reasoning` and leave the
    content empty (vllm#53284): the stage reads it from there instead of failing."""
    improper = '{"type": "improper", "clarifying_question": null, "reason": null, "reply": "Hi there!"}'
    script = StageScript(
        plans={}, on={"classify": lambda req: Reply(content=None, reasoning=f"The user greets. {improper}")}
    )
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, "hello!")
    assert result.status == "reply" and result.reply == "Hi there!"
    assert [r.stage for r in stub.requests] == ["classify"]  # no correction round was needed
