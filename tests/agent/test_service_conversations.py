"""Conversations through the agent and the MCP `ask` tool, for real (issues 10 and 11).

The model is tests/support/openai_stub.py: a real HTTP server on loopback speaking the OpenAI Chat
Completions API, scripted from the request it receives — like a model, it only knows what the
request shows it (the turn's question, the earlier turns, the previous SQL), so a follow-up can
only be answered right when the agent put the previous turn into the request. MCP clients are the
SDK's real `mcp.Client` (in-process and over stdio); `flexsql ask` runs as a subprocess.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from mcp import Client, types

from flexsql.agent.answer import Answer
from flexsql.agent.conversation import ConversationStore
from flexsql.agent.service import ask_question
from flexsql.config import AgentConfig, ModelConfig, Settings
from flexsql.server.app import build_server
from flexsql.server.cli import main as flexsql_main
from flexsql.server.sessions import SessionState
from flexsql.tools.engines import SourceRegistry, open_source
from tests.support.agent_support import question_of as support_question_of
from tests.support.mcp_support import server_env, stdio_params, text_of
from tests.support.openai_stub import OpenAIStub, StubRequest

pytestmark = pytest.mark.anyio

# -- the database: six stores, two years of sales -------------------------------------------------

STORES = [
    (1, "Harbor Online", "online"),
    (2, "Main Street", "retail"),
    (3, "Cloud Shop", "online"),
    (4, "Old Town", "retail"),
    (5, "Web Outlet", "online"),
    (6, "Mall Corner", "retail"),
]
# (store_id, year) -> the amounts of its sales; chosen so that each turn of the chain ranks differently
SALES = {
    (1, 2024): [400, 350],
    (2, 2024): [900, 800],
    (3, 2024): [300, 250, 210],
    (4, 2024): [700, 650],
    (5, 2024): [100, 90],
    (6, 2024): [500],
    (1, 2023): [100],
    (2, 2023): [300],
    (3, 2023): [900, 100],
    (4, 2023): [200],
    (5, 2023): [600, 500],
    (6, 2023): [50],
}


def top_stores(year: int, channel: str | None = None, n: int = 3) -> list[tuple[str, int]]:
    """The expected answer, computed from the data above (not by SQL)."""
    totals = {name: sum(SALES[(sid, year)]) for sid, name, ch in STORES if channel in (None, ch)}
    return sorted(totals.items(), key=lambda kv: -kv[1])[:n]


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("stores") / "stores.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE stores (store_id INTEGER PRIMARY KEY, name VARCHAR, channel VARCHAR)")
    con.execute(
        "CREATE TABLE sales (sale_id INTEGER PRIMARY KEY, store_id INTEGER REFERENCES stores(store_id), "
        "sale_date DATE, amount INTEGER)"
    )
    con.executemany("INSERT INTO stores VALUES (?, ?, ?)", STORES)
    rows, sale_id = [], 0
    for (store_id, year), amounts in SALES.items():
        for i, amount in enumerate(amounts):
            sale_id += 1
            rows.append((sale_id, store_id, f"{year}-{i + 3:02d}-15", amount))
    con.executemany("INSERT INTO sales VALUES (?, ?, ?, ?)", rows)
    con.close()
    return f"duckdb:///{path}"


# -- the scripted model -----------------------------------------------------------------------------

TOP_2024 = (
    "SELECT st.name, sum(s.amount) AS total FROM sales AS s JOIN stores AS st ON st.store_id = s.store_id "
    "WHERE year(s.sale_date) = 2024 GROUP BY st.name ORDER BY total DESC LIMIT 3"
)
BEST_BY = {  # the readings of "which store is the best?" and the SQL of each
    "highest total sales": "SELECT st.name, sum(s.amount) AS total FROM sales AS s JOIN stores AS st "
    "ON st.store_id = s.store_id GROUP BY st.name ORDER BY total DESC LIMIT 1",
    "most sales transactions": "SELECT st.name, count(*) AS sales FROM sales AS s JOIN stores AS st "
    "ON st.store_id = s.store_id GROUP BY st.name ORDER BY sales DESC, st.name LIMIT 1",
}
RETURNS_SQL = "SELECT store_id, count(*) AS n FROM returns GROUP BY store_id"  # there is no returns table
AMBIGUOUS = "Which store is the best?"
CLARIFYING = "Best by total sales amount or by number of sales?"
MISSING = "the database has no column for a store's floor area (stores: store_id, name, channel)"
_SQL_LINE = re.compile(r"^\s*(?:Last )?SQL(?: \(turn \d+\))?: (.+)$", re.MULTILINE)


def first_user_text(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")


def question_of(prompt: str) -> str:
    found = support_question_of(prompt)
    assert found, f"the prompt states no question:\n{prompt[:500]}"
    return found


def previous_sql(prompt: str) -> str | None:
    """The last SQL the earlier turns show (what a model told to edit it would start from)."""
    found = _SQL_LINE.findall(prompt)
    return found[-1].strip() if found else None


@dataclass
class StoreModel:
    """Answers each stage like a model that follows the contract and reads the conversation: the
    follow-ups are edits of the SQL the request shows, and fail loudly when it shows none."""

    calls: list[tuple[str, str]] = field(default_factory=list)  # (stage, question)

    def answer(self, stage: str, prompt: str) -> dict[str, Any]:
        question = question_of(prompt)
        self.calls.append((stage, question))
        if stage == "classify":
            return self.classify(question, prompt)
        if stage == "link":
            return {"tables": ["sales", "stores"], "notes": "sales.store_id -> stores.store_id"}
        if stage == "plan":
            return {
                "plans": [
                    {
                        "reading": question,
                        "text": f"PLAN: answer '{question}' from sales and stores",
                        "tables": ["sales", "stores"],
                    }
                ]
            }
        if stage == "implement":
            return {"language": "sql", "code": self.implement(question, prompt)}
        if stage == "repair":  # a model that cannot fix it: the same query again
            return {"language": "sql", "code": RETURNS_SQL}
        if stage == "evaluate":
            return {"verdict": "ok", "feedback": "the result answers the question"}
        raise AssertionError(f"unexpected stage {stage}")

    def classify(self, question: str, prompt: str) -> dict[str, Any]:
        none = {"clarifying_question": None, "reason": None, "reply": None}
        if question == AMBIGUOUS:
            return {**none, "type": "ambiguous", "clarifying_question": CLARIFYING, "readings": list(BEST_BY)}
        if "floor area" in question:
            return {**none, "type": "unanswerable", "reason": MISSING}
        if question.lower().startswith("thanks"):
            return {**none, "type": "improper", "reply": "You're welcome!"}
        return {**none, "type": "answerable"}

    def implement(self, question: str, prompt: str) -> str:
        previous = previous_sql(prompt)
        if "sold most in 2024" in question:
            return TOP_2024
        if question.startswith("list sales"):
            return LONG_SQL
        if "returns" in question:
            return RETURNS_SQL
        if question == "only the online ones":
            assert previous is not None, f"a follow-up without the previous SQL:\n{prompt}"
            return previous.replace(" GROUP BY", " AND st.channel = 'online' GROUP BY")
        if question == "and in 2023?":
            assert previous is not None, f"a follow-up without the previous SQL:\n{prompt}"
            return previous.replace("= 2024", "= 2023")
        # the ambiguous question, clarified in the question (elicitation) or by the next turn
        reading = next((r for r in BEST_BY if r in question), None)
        if (
            reading is None and "this message answers it" in prompt and AMBIGUOUS in prompt
        ):  # the user's answer
            reading = "most sales transactions" if "number" in question else "highest total sales"
        assert reading is not None, f"no reading of the ambiguous question is settled:\n{prompt}"
        return BEST_BY[reading]

    def __call__(self, req: StubRequest) -> dict[str, Any]:
        assert req.stage, "every request names its stage (X-FlexSQL-Stage)"
        return self.answer(req.stage, req.text)  # like a model, it reads the whole request


def settings_for(base_url: str | None, conversations_dir: Path | None = None) -> Settings:
    model = ModelConfig(base_url=base_url, model="stub" if base_url else None, max_retries=0, timeout_s=20.0)
    return Settings(
        model=model,
        agent=AgentConfig(
            plans=1,
            tool_rounds=2,
            max_seconds=60.0,
            conversations_dir=str(conversations_dir) if conversations_dir else None,
        ),
    )


def sources_for(db_url: str) -> SourceRegistry:
    registry = SourceRegistry()
    registry.add(open_source(db_url, name="stores"))
    return registry


def stage_requests(
    stub: OpenAIStub, stage: str, since: int = 0, until: int | None = None
) -> list[StubRequest]:
    return [r for r in stub.requests[since:until] if r.stage == stage]


def trace_events(path: Path, kind: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in events if e["kind"] == kind]


def names_and_totals(answer: Answer) -> list[tuple[str, int]]:
    return [(row[0], int(row[1])) for row in answer.rows]


# -- 1. a follow-up chain -------------------------------------------------------------------------


async def test_follow_up_chain_edits_the_previous_sql(db_url, tmp_path):
    """Three turns; each implement request shows the previous turn's SQL and role-state and the
    instruction to edit it; each SQL is the previous one edited; the role diffs are traced."""
    model = StoreModel()
    with OpenAIStub(model) as stub:
        settings = settings_for(stub.base_url)
        sources = sources_for(db_url)
        tools = SessionState(sources, settings).new_context()
        store = ConversationStore()
        turns = ["which stores sold most in 2024?", "only the online ones", "and in 2023?"]
        answers, marks = [], []
        for i, question in enumerate(turns):
            marks.append(len(stub.requests))
            answers.append(
                await ask_question(
                    tools,
                    settings,
                    question,
                    conversation_id="chain",
                    conversations=store,
                    trace_path=tmp_path / f"turn{i + 1}.jsonl",
                )
            )
        marks.append(len(stub.requests))
        sources.close()

    assert [a.status for a in answers] == ["answered"] * 3
    assert names_and_totals(answers[0]) == top_stores(2024)
    assert names_and_totals(answers[1]) == top_stores(2024, "online")
    assert names_and_totals(answers[2]) == top_stores(2023, "online")
    assert answers[1].sql == TOP_2024.replace(" GROUP BY", " AND st.channel = 'online' GROUP BY")
    assert answers[2].sql == answers[1].sql.replace("= 2024", "= 2023")

    first = stage_requests(stub, "implement", 0)[0]
    assert "SQL:" not in first.text  # a new conversation has no history
    for turn in (1, 2):
        implement = stage_requests(stub, "implement", marks[turn], marks[turn + 1])
        assert len(implement) == 1
        prompt = implement[0].text
        assert prompt.count(f"SQL: {answers[turn - 1].sql}") == 1  # the earlier turn's SQL, once
        assert f"The last SQL is turn {turn}'s (above). By role:" in prompt
        classify = stage_requests(stub, "classify", marks[turn], marks[turn + 1])[0]
        assert turns[turn - 1] in classify.text  # classify sees the earlier turns too
        # the turn's requests start as the earlier turn's did: its question, as it was sent
        earlier = stage_requests(stub, "classify", marks[turn - 1])[0].messages[1]["content"]
        assert earlier.startswith(classify.messages[1]["content"])
    role_states = [stage_requests(stub, "implement", marks[t])[0].text for t in (1, 2)]
    assert "filter: year(sales.sale_date) = 2024;" in role_states[0]
    assert "year(sales.sale_date) = 2024, stores.channel = 'online'" in role_states[1]

    assert trace_events(tmp_path / "turn1.jsonl", "role_diff") == []
    diff2 = trace_events(tmp_path / "turn2.jsonl", "role_diff")
    diff3 = trace_events(tmp_path / "turn3.jsonl", "role_diff")
    assert [d["diff"]["added"] for d in diff2] == [{"filter": ["stores.channel = 'online'"]}]
    assert [d["diff"]["literals"] for d in diff3] == [
        [{"column": "year(sales.sale_date)", "op": "=", "old": "2024", "new": "2023"}]
    ]
    assert diff3[0]["text"] == "filter year(sales.sale_date) = 2024 → 2023"
    conv = store.get("chain")
    assert [t.status for t in conv.turns] == ["answered"] * 3 and conv.turns[2].sql == answers[2].sql


# -- 2. an ambiguous turn: elicitation, or needs_clarification and the next turn ------------------


def best_store(reading: str) -> list[list[Any]]:
    if reading == "highest total sales":
        totals = {name: sum(sum(SALES[(sid, y)]) for y in (2023, 2024)) for sid, name, _ in STORES}
    else:
        totals = {name: sum(len(SALES[(sid, y)]) for y in (2023, 2024)) for sid, name, _ in STORES}
    name, value = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    return [[name, value]]


@pytest.mark.parametrize(
    "mode", ["legacy", "auto"]
)  # back-channel (2025) / InputRequiredResult round (2026-07-28)
async def test_ambiguous_turn_is_clarified_through_elicitation(db_url, mode):
    """A client that supports elicitation is asked the one clarifying question, as a form whose
    answer is a choice among the readings; the agent goes on with the reading picked and answers."""
    model = StoreModel()
    asked: list[types.ElicitRequestFormParams] = []

    async def elicit(context: Any, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "most sales transactions"})

    with OpenAIStub(model) as stub:
        sources = sources_for(db_url)
        server = build_server(settings_for(stub.base_url), sources)
        async with Client(server, mode=mode, elicitation_callback=elicit) as client:
            result = await client.call_tool("ask", {"question": AMBIGUOUS, "conversation_id": "best"})
        sources.close()

    assert not result.is_error, text_of(result)
    out = result.structured_content
    assert out["status"] == "answered" and out["question"] == AMBIGUOUS
    assert out["sql"] == BEST_BY["most sales transactions"]
    assert out["rows"] == best_store("most sales transactions")
    assert out["usage"]["model_calls"] == len(stub.requests) == 6  # the classify that asked counts too
    assert len(asked) == 1 and asked[0].message == CLARIFYING
    assert asked[0].mode in (None, "form")
    choice = asked[0].requested_schema["properties"]["answer"]
    assert choice.get("enum") == list(BEST_BY), choice
    # the second classify request carries the user's choice; no clarification is left pending
    classify = [q for stage, q in model.calls if stage == "classify"]
    assert len(classify) == 2 and "most sales transactions" in classify[1]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_declined_elicitation_returns_the_question_instead(db_url, mode):
    async def decline(context: Any, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    with OpenAIStub(StoreModel()) as stub:
        sources = sources_for(db_url)
        server = build_server(settings_for(stub.base_url), sources)
        async with Client(server, mode=mode, elicitation_callback=decline) as client:
            result = await client.call_tool("ask", {"question": AMBIGUOUS})
        sources.close()
    out = result.structured_content
    assert out["status"] == "needs_clarification" and out["clarifying_question"] == CLARIFYING
    assert [r.stage for r in stub.requests] == ["classify"]


async def test_ambiguous_turn_without_elicitation_asks_and_the_next_turn_answers(db_url):
    """Without elicitation: needs_clarification with the question and the readings; the user's
    next turn ("by the number of sales") is read as the answer and resolved."""
    model = StoreModel()
    with OpenAIStub(model) as stub:
        sources = sources_for(db_url)
        server = build_server(settings_for(stub.base_url), sources)
        async with Client(server, mode="legacy") as client:
            first = await client.call_tool("ask", {"question": AMBIGUOUS, "conversation_id": "best"})
            mark = len(stub.requests)
            second = await client.call_tool(
                "ask", {"question": "by the number of sales", "conversation_id": "best"}
            )
        sources.close()

    asked = first.structured_content
    assert asked["status"] == "needs_clarification" and asked["sql"] is None
    assert asked["clarifying_question"] == CLARIFYING and asked["readings"] == list(BEST_BY)
    assert f"question for the user: {CLARIFYING}" in text_of(first)
    assert [r.stage for r in stub.requests[:mark]] == ["classify"]  # no SQL was written for it
    answered = second.structured_content
    assert answered["status"] == "answered", text_of(second)
    assert answered["sql"] == BEST_BY["most sales transactions"]
    assert answered["rows"] == best_store("most sales transactions")
    classify = stage_requests(stub, "classify", mark)[0].text
    assert f"I asked: {CLARIFYING}" in classify  # the earlier turn's account
    assert "this message answers it" in classify


# -- 3. turns that get no SQL ---------------------------------------------------------------------


async def test_unanswerable_and_improper_turns_write_no_sql(db_url):
    model = StoreModel()
    with OpenAIStub(model) as stub:
        settings = settings_for(stub.base_url)
        sources = sources_for(db_url)
        tools = SessionState(sources, settings).new_context()
        store = ConversationStore()
        missing = await ask_question(
            tools,
            settings,
            "Which store has the largest floor area?",
            conversation_id="c",
            conversations=store,
        )
        thanks = await ask_question(tools, settings, "thanks!", conversation_id="c", conversations=store)
        sources.close()

    assert missing.status == "unanswerable" and missing.reason == MISSING and "floor area" in missing.reason
    assert missing.sql is None and missing.result_id is None
    assert thanks.status == "reply" and thanks.reply == "You're welcome!"
    assert thanks.sql is None and thanks.code is None and thanks.candidates == []
    assert [r.stage for r in stub.requests] == ["classify", "classify"]  # no link, plan or implement request
    conv = store.get("c")
    assert [(t.type, t.status) for t in conv.turns] == [
        ("unanswerable", "unanswerable"),
        ("improper", "reply"),
    ]
    assert conv.turns[0].reason == MISSING


# -- 4. a conversation resumed from disk ----------------------------------------------------------


def flexsql_ask(
    question: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`flexsql ask` as users run it: a new process each time (-P: the cwd cannot shadow flexsql)."""
    command = [sys.executable, "-P", "-m", "flexsql.server", "ask", question, *args]
    return subprocess.run(
        command,
        env=server_env({"COLUMNS": "250", **(env or {})}),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.integration
async def test_conversation_resumed_from_disk_by_a_second_process(db_url, tmp_path):
    """Two `flexsql ask --conversation ID` processes: the second one's requests show the first
    turn's question and SQL, and its answer edits that SQL."""
    folder = tmp_path / "conversations"
    env = {"FLEXSQL_AGENT__CONVERSATIONS_DIR": str(folder)}
    with OpenAIStub(StoreModel()) as stub:
        common = [
            "--db",
            db_url,
            "--base-url",
            stub.base_url,
            "--model",
            "stub",
            "--plans",
            "1",
            "--conversation",
            "sales-2024",
            "--json",
        ]
        first = flexsql_ask("which stores sold most in 2024?", *common, env=env)
        assert first.returncode == 0, first.stderr
        mark = len(stub.requests)
        second = flexsql_ask("only the online ones", *common, env=env)
        assert second.returncode == 0, second.stderr

    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert one["status"] == two["status"] == "answered" and two["conversation_id"] == "sales-2024"
    assert one["sql"] == TOP_2024
    assert two["sql"] == TOP_2024.replace(" GROUP BY", " AND st.channel = 'online' GROUP BY")
    assert [(r[0], int(r[1])) for r in two["rows"]] == top_stores(2024, "online")
    later = stub.requests[mark:]
    assert later and all(
        "which stores sold most in 2024?" in r.text for r in later if r.stage in ("classify", "implement")
    )
    assert any(f"SQL: {TOP_2024}" in r.text for r in later if r.stage == "implement")
    saved = json.loads((folder / "sales-2024.json").read_text())
    assert [t["question"] for t in saved["turns"]] == [
        "which stores sold most in 2024?",
        "only the online ones",
    ]
    assert oct((folder / "sales-2024.json").stat().st_mode & 0o777) == "0o600"


# -- 5. state bounded -----------------------------------------------------------------------------

LONG_SQL = (
    "SELECT sale_id, amount FROM sales WHERE sale_id IN ("
    + ", ".join(str(i) for i in range(1, 400))
    + ") ORDER BY sale_id"
)


async def test_a_200_turn_conversation_keeps_prompt_and_file_bounded(db_url, tmp_path):
    """200 turns (long chit-chat, and every tenth a query with a 2 KB SQL): the classify request
    and the stored file stop growing early, and the latest turns are still in the prompt."""
    model = StoreModel()
    sizes: list[tuple[int, int]] = []  # (classify request's user message, stored file) per turn
    with OpenAIStub(model) as stub:
        settings = settings_for(stub.base_url)
        settings.agent.evaluate = False
        sources = sources_for(db_url)
        tools = SessionState(sources, settings).new_context()
        store = ConversationStore(tmp_path / "conversations")
        for i in range(200):
            question = (
                f"list sales, turn {i}"
                if i % 10 == 9
                else f"thanks for turn {i}! " + "this is a long and chatty remark. " * 40
            )
            mark = len(stub.requests)
            result = await ask_question(
                tools, settings, question, conversation_id="long", conversations=store
            )
            assert result.status == ("answered" if i % 10 == 9 else "reply"), result.reason
            classify = stage_requests(stub, "classify", mark)[0]
            sizes.append((len(classify.text), (tmp_path / "conversations" / "long.json").stat().st_size))
        sources.close()
        last_classify = stage_requests(stub, "classify")[-1].text

    prompt_sizes, file_sizes = [p for p, _ in sizes], [f for _, f in sizes]
    # the history is bounded by HISTORY_CHARS (12,000), on top of the instruction and the question
    plateau = max(prompt_sizes[:40])
    assert max(prompt_sizes[40:]) <= plateau * 1.05, (plateau, max(prompt_sizes[40:]))
    assert max(prompt_sizes) < 24_000
    assert max(file_sizes[40:]) <= max(file_sizes[:40]) * 1.1 and max(file_sizes) < 64_000
    conv = store.get("long")
    assert len(conv.turns) <= store.max_turns and conv.dropped == 200 - len(conv.turns)
    # the last SQL (turn 190) stays in the prompt although nine long turns came after it
    assert "thanks for turn 198!" in last_classify
    assert f"The last SQL is turn 190's: {LONG_SQL}." in last_classify  # whole
    assert "earlier turns of this conversation not shown" in last_classify


# -- 6. the MCP `ask` tool ------------------------------------------------------------------------

TOP_QUESTION = "which stores sold most in 2024?"


def expected_rows() -> list[list[Any]]:
    return [[name, total] for name, total in top_stores(2024)]


async def test_ask_tool_answers_with_a_fetchable_result_and_reports_each_stage(db_url):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    with OpenAIStub(StoreModel()) as stub:
        sources = sources_for(db_url)
        server = build_server(settings_for(stub.base_url), sources)
        async with Client(server) as client:
            result = await client.call_tool("ask", {"question": TOP_QUESTION}, progress_callback=on_progress)
            out = result.structured_content
            fetched = await client.call_tool("fetch_rows", {"result_id": out["result_id"], "limit": 10})
        sources.close()

    assert not result.is_error, text_of(result)
    assert out["status"] == "answered" and out["sql"] == TOP_2024 and out["rows"] == expected_rows()
    assert out["usage"]["model_calls"] == len(stub.requests) == 5  # classify, link, plan, implement, evaluate
    assert "status: answered" in text_of(result) and out["result_id"] in text_of(result)
    assert not fetched.is_error and fetched.structured_content["rows"] == expected_rows()
    stages = [message.split(":")[0] for _, _, message in progress if message]
    assert stages == ["classify", "link", "plan", "run", "evaluate", "select"], progress
    done = [p for p, _, _ in progress]
    assert done == sorted(done) and len(set(done)) == len(done)  # progress only moves forward


def sampling_answers(model: StoreModel, seen: list[str]):  # type: ignore[no-untyped-def]
    """A client's sampling callback answering like the scripted model (stage from the metadata)."""

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        stage = (params.metadata or {}).get("flexsql_stage")
        seen.append(stage)
        prompt = next(m.content_as_list[0].text for m in params.messages if m.role == "user")
        reply = json.dumps(model.answer(stage, prompt))
        return types.CreateMessageResult(
            role="assistant", model="client-llm", content=types.TextContent(type="text", text=reply)
        )

    return sample


async def test_ask_tool_runs_on_the_clients_model_through_sampling(db_url):
    """No endpoint configured, a client that answers sampling requests: every stage is asked of the
    client's model, and the answer is right."""
    seen: list[str] = []
    sources = sources_for(db_url)
    server = build_server(settings_for(None), sources)
    async with Client(
        server, mode="legacy", sampling_callback=sampling_answers(StoreModel(), seen)
    ) as client:
        result = await client.call_tool("ask", {"question": TOP_QUESTION})
    sources.close()
    assert not result.is_error, text_of(result)
    out = result.structured_content
    assert out["status"] == "answered" and out["rows"] == expected_rows()
    assert seen == ["classify", "link", "plan", "implement", "evaluate"]
    requests = trace_events(Path(out["trace"]), "request")
    assert {e["model"] for e in requests} == {"mcp-sampling"}


async def test_ask_tool_without_endpoint_or_sampling_says_what_to_configure(db_url):
    sources = sources_for(db_url)
    server = build_server(settings_for(None), sources)
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("ask", {"question": TOP_QUESTION})
    sources.close()
    assert result.is_error
    error = result.meta["flexsql/error"]
    assert error["code"] == "config"
    for setting in ("[model]", "FLEXSQL_MODEL__BASE_URL", "FLEXSQL_MODEL__MODEL", "--base-url"):
        assert setting in error["message"] and setting in text_of(result)


@pytest.mark.integration
async def test_ask_tool_over_stdio_with_the_endpoint_from_the_environment(db_url):
    with OpenAIStub(StoreModel()) as stub:
        env = {
            "FLEXSQL_MODEL__BASE_URL": stub.base_url,
            "FLEXSQL_MODEL__MODEL": "stub",
            "FLEXSQL_AGENT__PLANS": "1",
        }
        async with Client(stdio_params(db_url, env=env)) as client:
            result = await client.call_tool(
                "ask", {"question": TOP_QUESTION, "conversation_id": "over-stdio"}
            )
            out = result.structured_content
            fetched = await client.call_tool("fetch_rows", {"result_id": out["result_id"]})
            follow = await client.call_tool(
                "ask", {"question": "only the online ones", "conversation_id": "over-stdio"}
            )
    assert not result.is_error, text_of(result)
    assert out["status"] == "answered" and out["rows"] == expected_rows()
    assert fetched.structured_content["rows"] == expected_rows()
    assert follow.structured_content["sql"] == TOP_2024.replace(
        " GROUP BY", " AND st.channel = 'online' GROUP BY"
    )
    assert {r.headers.get("x-flexsql-stage") for r in stub.requests} >= {"classify", "implement"}


# -- 7. `flexsql ask` ------------------------------------------------------------------------------

API_KEY = "sk-flexsql-test-" + "Zq7" * 10


@pytest.mark.integration
def test_flexsql_ask_prints_the_answer_and_never_the_key(db_url, tmp_path):
    env = {"FLEXSQL_MODEL__API_KEY_ENV": "MY_KEY", "MY_KEY": API_KEY}
    trace = tmp_path / "trace.jsonl"
    with OpenAIStub(StoreModel()) as stub:
        common = ["--db", db_url, "--base-url", stub.base_url, "--model", "stub", "--plans", "1"]
        text = flexsql_ask(TOP_QUESTION, *common, "--trace", str(trace), env=env)
        as_json = flexsql_ask(TOP_QUESTION, *common, "--json", env=env)
    assert text.returncode == 0, text.stderr
    assert as_json.returncode == 0, as_json.stderr
    # the key was sent to the endpoint, and nowhere else
    assert stub.requests and {r.headers.get("authorization") for r in stub.requests} == {f"Bearer {API_KEY}"}
    for output in (text.stdout, text.stderr, as_json.stdout, as_json.stderr, trace.read_text()):
        assert API_KEY not in output and API_KEY[:24] not in output

    lines = text.stdout.splitlines()
    assert lines[0] == "answered"
    assert TOP_2024 in " ".join(text.stdout.split())
    for name, total in top_stores(2024):
        assert any(name in line and str(total) in line for line in lines), text.stdout
    assert "candidates" in text.stdout and "model calls 5" in text.stdout
    answer = Answer.model_validate_json(as_json.stdout)
    assert answer.status == "answered" and answer.sql == TOP_2024
    assert [[r[0], int(r[1])] for r in answer.rows] == expected_rows() and answer.total_rows == 3
    assert {e["kind"] for e in map(json.loads, trace.read_text().splitlines())} >= {
        "question",
        "request",
        "reply",
        "candidate",
        "answer",
    }


def test_flexsql_ask_on_a_failed_question_exits_1_and_shows_each_candidates_error(db_url):
    """Every candidate fails (the model keeps querying a table that does not exist): status failed,
    exit 1, the reason names the error, and no failed candidate is shown as chosen."""
    with OpenAIStub(StoreModel()) as stub:
        result = CliRunner().invoke(
            flexsql_main,
            [
                "ask",
                "which store has the most returns?",
                "--db",
                db_url,
                "--base-url",
                stub.base_url,
                "--model",
                "stub",
                "--plans",
                "1",
            ],
            env={"COLUMNS": "250"},
        )
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0] == "failed" and "reason: none of the 4 candidate(s) ran" in result.output
    assert "returns" in result.output and "does not exist" in result.output.lower()
    rows = [line for line in lines if re.match(r"^│ c\d ", line)]
    assert len(rows) == 4 and all("engine_error" in row for row in rows) and "chosen" not in result.output
    assert [r.stage for r in stub.requests] == [
        "classify",
        "link",
        "plan",
        "implement",
        "repair",
        "repair",
        "repair",
    ]
