"""Shared pieces of the agent's acceptance tests (tests/agent/test_service.py): a small real DuckDB shop,
a ToolContext over it, Settings pointing the agent at the OpenAI stub, and a script that answers
each request by its X-FlexSQL-Stage header the way a well-behaved model would.

    shop = build_shop(tmp_path)                  # customers / orders / order_items, with FKs
    script = StageScript(plans={"count every order": "SELECT count(*) AS n FROM orders"})
    with OpenAIStub(script) as stub:
        result = await ask(shop, stub, "How many orders are there?")

A stage's default can be replaced by a function of the request (`script.on["link"] = fn`); a
function returning None falls back to the default.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from flexsql.agent.answer import Answer
from flexsql.agent.service import ask_question
from flexsql.config import AgentConfig, LimitsConfig, ModelConfig, Settings
from flexsql.server.sessions import SessionState
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from tests.support.openai_stub import OpenAIStub, Reply, StubRequest

CITIES = ["Paris", "Lyon", "Berlin", "Madrid", "Rome"]
STATUSES = ["shipped", "pending", "cancelled"]
PRODUCTS = ["lamp", "chair", "desk", "shelf", "rug"]


@dataclass
class Shop:
    """The shop database and what the tests compare the agent's answers with."""

    url: str
    customers: int
    orders: int
    shipped: int
    paris_customers: list[str]
    sources: SourceRegistry = field(default_factory=SourceRegistry)

    def close(self) -> None:
        self.sources.close()


def build_shop(directory: Path, seed: int = 7) -> Shop:
    """A few hundred deterministic rows: 40 customers, 300 orders, ~750 order items."""
    rng = random.Random(seed)
    path = directory / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, city VARCHAR)"
    )
    con.execute(
        "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, "
        "customer_id INTEGER NOT NULL REFERENCES customers(customer_id), order_date DATE, status VARCHAR)"
    )
    con.execute(
        "CREATE TABLE order_items (item_id INTEGER PRIMARY KEY, "
        "order_id INTEGER NOT NULL REFERENCES orders(order_id), product VARCHAR, quantity INTEGER, "
        "price DECIMAL(10, 2))"
    )
    customers = [(i, f"customer {i:02d}", CITIES[i % len(CITIES)]) for i in range(1, 41)]
    _insert(con, "customers", customers)
    orders = [
        (
            i,
            rng.randint(1, 40),
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            rng.choice(STATUSES),
        )
        for i in range(1, 301)
    ]
    _insert(con, "orders", orders)
    items, item_id = [], 0
    for order_id, *_ in orders:
        for _ in range(rng.randint(1, 4)):
            item_id += 1
            items.append(
                (item_id, order_id, rng.choice(PRODUCTS), rng.randint(1, 5), rng.randint(100, 9999) / 100)
            )
    _insert(con, "order_items", items)
    con.close()
    url = f"duckdb:///{path}"
    # one open source for all the tests (closed by Shop.close): a run cancelled mid-query leaves
    # the engine winding down for a moment, and closing the source then would race it
    return Shop(
        url=url,
        customers=len(customers),
        orders=len(orders),
        shipped=sum(1 for o in orders if o[3] == "shipped"),
        paris_customers=sorted(name for _, name, city in customers if city == "Paris"),
        sources=SourceRegistry([open_source(url, name="shop")]),
    )


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    """All the rows in one statement (executemany inserts a row at a time: 1.8 s for this shop)."""
    names = [row[1] for row in con.execute(f"PRAGMA table_info('{table}')").fetchall()]
    frame = pa.table({name: [row[i] for row in rows] for i, name in enumerate(names)})
    con.register("new_rows", frame)
    con.execute(f"INSERT INTO {table} SELECT * FROM new_rows")
    con.unregister("new_rows")


def settings_for(
    stub: OpenAIStub,
    *,
    model: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
) -> Settings:
    """Settings whose [model] is the stub: few, fast retries; small tool rounds so a test stays short."""
    model_cfg = {
        "base_url": stub.base_url,
        "model": "stub",
        "max_retries": 1,
        "retry_backoff_s": 0.01,
        "timeout_s": 20.0,
        **(model or {}),
    }
    agent_cfg = {"plans": 2, "tool_rounds": 3, "max_seconds": 60.0, **(agent or {})}
    return Settings(
        model=ModelConfig(**model_cfg), agent=AgentConfig(**agent_cfg), limits=LimitsConfig(**(limits or {}))
    )


def tool_context(shop: Shop, settings: Settings) -> ToolContext:
    """A fresh session (its own result store) over the shop, with these settings' limits."""
    return SessionState(shop.sources, settings).new_context()


async def ask(
    shop: Shop,
    stub: OpenAIStub,
    question: str,
    *,
    model: dict[str, Any] | None = None,
    agent: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    tools: ToolContext | None = None,
    **kwargs: Any,
) -> Answer:
    """One question through `ask_question` with the real OpenAI-compatible backend against `stub`;
    a fresh session unless `tools` (one client's session, e.g. for a conversation) is given."""
    settings = settings_for(stub, model=model, agent=agent, limits=limits)
    return await ask_question(tools or tool_context(shop, settings), settings, question, **kwargs)


# -- the scripted model ---------------------------------------------------------------------------

Handler = Callable[[StubRequest], Any]


def program(code: str, language: str = "sql") -> dict[str, str]:
    return {"language": language, "code": code}


def plan(text: str, tables: list[str] | None = None, reading: str | None = None) -> dict[str, Any]:
    return {"reading": reading or text, "text": text, "tables": tables or ["orders"]}


def _longest_in(text: str, keys: Any) -> Any:
    """The key that occurs in `text` as whole lines (prompts put plans and programs on lines of
    their own; a shorter SQL is often a prefix of a longer one), the longest when several do."""
    padded = f"\n{text}\n"
    found = [k for k in keys if f"\n{k.strip()}\n" in padded]
    return max(found, key=len) if found else None


@dataclass
class StageScript:
    """Answers each request by its stage, like a model that follows the contract.

    plans: plan text -> the program its implementation returns (SQL text, or a program() dict);
    repairs: failing code -> the repaired program; verdicts: code -> (verdict, feedback), default ok;
    revisions: plan text -> the revised plan() dict. `on[stage]` overrides a stage."""

    plans: dict[str, Any]
    repairs: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, tuple[str, str]] = field(default_factory=dict)
    revisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    link_tables: list[str] = field(default_factory=lambda: ["orders"])
    on: dict[str, Handler] = field(default_factory=dict)
    usage: tuple[int, int] | None = None  # (prompt, completion) tokens every JSON reply reports

    def __call__(self, req: StubRequest) -> Any:
        assert req.stage, f"a request without X-FlexSQL-Stage: {req.headers}"
        handler = self.on.get(req.stage)
        reply = handler(req) if handler is not None else None
        if reply is None:
            reply = getattr(self, f"_{req.stage}")(req)
        if self.usage is not None and isinstance(reply, dict):
            reply = Reply(content=reply, usage=self.usage)
        return reply

    def all_plans(self) -> dict[str, Any]:
        texts = dict(self.plans)
        for revised in self.revisions.values():
            texts.setdefault(revised["text"], None)
        return texts

    def _classify(self, req: StubRequest) -> Any:
        return {"type": "answerable", "clarifying_question": None, "reason": None, "reply": None}

    def _link(self, req: StubRequest) -> Any:
        return {"tables": self.link_tables, "notes": "orders.customer_id -> customers.customer_id"}

    def _plan(self, req: StubRequest) -> Any:
        return {"plans": [plan(text) for text in self.plans]}

    def _implement(self, req: StubRequest) -> Any:
        key = _instruction_with(req, self.all_plans())
        assert key is not None, f"an implement request names no known plan:\n{_user_text(req)[:600]}"
        code = self.plans.get(key)
        if code is None:  # a revised plan: its program is given with the revision
            code = next(r["program"] for r in self.revisions.values() if r["text"] == key)
        return code if isinstance(code, dict) else program(code)

    def _repair(self, req: StubRequest) -> Any:
        key = _instruction_with(req, self.repairs)
        assert key is not None, (
            f"a repair request names no program the script repairs:\n{_user_text(req)[:600]}"
        )
        fixed = self.repairs[key]
        return fixed if isinstance(fixed, dict) else program(fixed)

    def _evaluate(self, req: StubRequest) -> Any:
        key = _longest_in(_user_text(req), self.verdicts)
        verdict, feedback = (
            self.verdicts[key] if key is not None else ("ok", "the result answers the question")
        )
        return {"verdict": verdict, "feedback": feedback}

    def _revise_plan(self, req: StubRequest) -> Any:
        key = _instruction_with(req, self.revisions)
        assert key is not None, (
            f"a revise_plan request names no plan the script revises:\n{_user_text(req)[:600]}"
        )
        revised = self.revisions[key]
        return {k: revised[k] for k in ("reading", "text", "tables")}

    def _knowledge(self, req: StubRequest) -> Any:
        return {"summary": "nothing the question needs"}


def _user_text(req: StubRequest) -> str:
    """The stage's instruction: the last user message that starts with a stage tag (`[implement] …`);
    later user messages only demand the answer or ask for a fix. A repair or revision after an
    evaluation names its plan and program in the messages before: the instructions of the request,
    newest first, are searched by `_instruction_with`."""
    for message in reversed(req.messages):
        content = str(message.get("content") or "")
        if message.get("role") == "user" and _TAG.search(content):
            return content[_TAG.search(content).start() :]  # type: ignore[union-attr]
    return ""


_TAG = re.compile(r"(?m)^\[(classify|link|plan|implement|evaluate|repair|revise_plan|knowledge)\]")


def _instructions(req: StubRequest) -> list[str]:
    """Every stage instruction in the request, newest first (a user message can hold several: the
    opening holds the question and the first step's instruction)."""
    out: list[str] = []
    for message in reversed(req.messages):
        content = str(message.get("content") or "")
        if message.get("role") != "user":
            continue
        starts = [m.start() for m in _TAG.finditer(content)]
        if not starts:
            continue
        for a, b in reversed(list(zip(starts, [*starts[1:], len(content)], strict=True))):
            out.append(content[a:b])
    return out


def _instruction_with(req: StubRequest, keys: Any) -> Any:
    """The longest of `keys` in the newest instruction that names any of them."""
    for text in _instructions(req):
        key = _longest_in(text, keys)
        if key is not None:
            return key
    return None


def first_user_text(req: StubRequest) -> str:
    """The request's stage instruction (the name kept from when each stage had a fresh request)."""
    return _user_text(req)


def question_of(text: str) -> str:
    """The turn's own question in a request's text: the last "Question: …" it states (a conversation's
    earlier turns come before it), up to a blank line or the next step's instruction."""
    starts = [m.end() for m in re.finditer(r"^Question: ", text, re.MULTILINE)]
    if not starts:
        return ""
    return re.split(r"\n\n|\n(?=\[)", text[starts[-1] :], maxsplit=1)[0]


def requests_for(stub: OpenAIStub, stage: str) -> list[StubRequest]:
    return [r for r in stub.requests if r.stage == stage]


def response_schema(req: StubRequest) -> dict[str, Any] | None:
    """The json_schema a request asked for in response_format, if any."""
    fmt = req.body.get("response_format") or {}
    return fmt.get("json_schema", {}).get("schema") if fmt.get("type") == "json_schema" else None


def system_schema(req: StubRequest) -> dict[str, Any]:
    """The JSON schema the system message states (every request states its stage's)."""
    system = str(req.messages[0].get("content") or "")
    marker = "Its JSON schema: "
    assert marker in system, f"the system message states no schema:\n{system[:600]}"
    return json.loads(system.split(marker, 1)[1].split("\n\n", 1)[0])


def tool_reply(*calls: tuple[str, dict[str, Any] | str]) -> Reply:
    return Reply(tool_calls=list(calls))
