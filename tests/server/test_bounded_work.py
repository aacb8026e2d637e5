"""Server-wide ceilings on what clients can make the server do at once (issue 21): agent runs
(`ask`), run_python sandboxes, and conversation files kept on disk. Beyond a ceiling a call waits a
bounded time, then gets a clear `busy:` error; the oldest conversation files are pruned.

The model is the scripted OpenAI-compatible stub; MCP clients are the SDK's real `Client`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from flexsql.agent.conversation import ConversationStore, Turn
from flexsql.config import SandboxConfig
from flexsql.server.app import build_server
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.python_tool import RunPython, run_python
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.results import ResultStore
from flexsql.tools.sandbox.supervisor import SANDBOX_SLOTS
from tests.support.agent_support import Shop, StageScript, build_shop, first_user_text, settings_for
from tests.support.mcp_support import text_of
from tests.support.openai_stub import OpenAIStub, StubRequest
from tests.support.sandbox import TEST_SANDBOX

pytestmark = pytest.mark.anyio

COUNT_SQL = "SELECT count(*) AS n FROM orders"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shop]:
    built = build_shop(tmp_path_factory.mktemp("shop"))
    yield built
    built.close()


async def until(condition: Callable[[], Any], what: str) -> None:
    """Wait for something the test cannot await directly (a request reaching the stub)."""
    with anyio.fail_after(60):
        while not condition():
            await anyio.sleep(0.02)
    assert condition(), what


def held_at_classify(gate: threading.Event) -> Callable[[StubRequest], Any]:
    """A classify reply that waits until the test opens the gate (a slow model)."""

    def reply(req: StubRequest) -> Any:
        assert gate.wait(60), "the test never opened the gate"
        return None  # then the script's default (answerable)

    return reply


# -- agent runs -------------------------------------------------------------------------------------


async def test_an_ask_beyond_the_agent_run_cap_is_told_the_server_is_busy(shop: Shop) -> None:
    gate = threading.Event()
    script = StageScript(plans={"count every order": COUNT_SQL}, on={"classify": held_at_classify(gate)})
    with OpenAIStub(script) as stub:
        agent = {"plans": 1, "evaluate": False, "max_concurrent_runs": 1, "run_wait_s": 0.2}
        server = build_server(settings_for(stub, agent=agent), shop.sources)
        results: dict[str, Any] = {}
        async with Client(server) as a, Client(server) as b:

            async def first() -> None:
                results["a"] = await a.call_tool("ask", {"question": "How many orders are there?"})

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await until(lambda: stub.requests, "A's run reached the model")
                busy = await b.call_tool("ask", {"question": "How many orders are there?"})
                gate.set()
            again = await b.call_tool("ask", {"question": "How many orders are there?"})

    assert busy.is_error, text_of(busy)
    assert text_of(busy).startswith("busy: 1 agent run in progress"), text_of(busy)
    assert "try again" in text_of(busy) and "max_concurrent_runs" in text_of(busy)
    assert busy.meta["flexsql/error"]["code"] == "busy"
    assert [r.stage for r in stub.requests].count("classify") == 2  # B's refused ask cost no model call
    for result in (results["a"], again):  # the run in progress, and B once the server is free
        assert not result.is_error and result.structured_content["status"] == "answered", text_of(result)


async def test_an_ask_waits_for_a_free_run_slot_within_the_wait(shop: Shop) -> None:
    gate = threading.Event()
    script = StageScript(plans={"count every order": COUNT_SQL}, on={"classify": held_at_classify(gate)})
    with OpenAIStub(script) as stub:
        agent = {"plans": 1, "evaluate": False, "max_concurrent_runs": 1, "run_wait_s": 60}
        server = build_server(settings_for(stub, agent=agent), shop.sources)
        slots = server.flexsql_state.agent_runs  # type: ignore[attr-defined]
        results: dict[str, Any] = {}
        async with Client(server) as a, Client(server) as b:

            async def call(name: str, client: Client, question: str) -> None:
                results[name] = await client.call_tool("ask", {"question": question})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "a", a, "How many orders are there? (A)")
                await until(lambda: stub.requests, "A's run reached the model")
                tg.start_soon(call, "b", b, "How many orders are there? (B)")
                await until(lambda: slots.waiting == 1, "B waits for the slot")
                gate.set()

    for name in ("a", "b"):
        assert results[name].structured_content["status"] == "answered", text_of(results[name])
    runs = [r.run_id for r in stub.requests]
    a_run, b_run = results["a"].structured_content["run_id"], results["b"].structured_content["run_id"]
    assert max(i for i, r in enumerate(runs) if r == a_run) < runs.index(b_run)  # one run at a time
    assert "(B)" in first_user_text(stub.requests[runs.index(b_run)])


# -- sandboxes ------------------------------------------------------------------------------------


def python_context(tmp_path: Path, **sandbox: Any) -> ToolContext:
    from tests.support.engines import make_duckdb

    sources = SourceRegistry([open_source(make_duckdb(tmp_path), name="shop")])
    config = SandboxConfig(**{**TEST_SANDBOX.model_dump(), **sandbox})
    return ToolContext(sources=sources, sandbox=config, results=ResultStore())


@pytest.mark.integration
async def test_run_python_beyond_the_sandbox_cap_is_told_the_server_is_busy(tmp_path: Path) -> None:
    """Over MCP: one sandbox allowed; a second client's run_python waits briefly, then gets a clear
    error; the running program is unaffected, and the next call runs."""
    from tests.support.engines import make_duckdb

    settings = settings_for_sandbox(max_concurrent=1, queue_wait_s=0.3)
    sources = SourceRegistry([open_source(make_duckdb(tmp_path), name="shop")])
    server = build_server(settings, sources)
    results: dict[str, Any] = {}
    await until(lambda: SANDBOX_SLOTS.running == 0, "no program of an earlier test still runs")
    async with Client(server) as a, Client(server) as b:

        async def slow() -> None:
            results["a"] = await a.call_tool("run_python", {"code": "import time\ntime.sleep(3)\n'slept'"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await until(lambda: SANDBOX_SLOTS.running == 1, "A's program is running")
            busy = await b.call_tool("run_python", {"code": "1 + 1"})
        after = await b.call_tool("run_python", {"code": "1 + 1"})
    sources.close()
    assert busy.is_error and text_of(busy).startswith("busy: 1 run_python sandbox"), text_of(busy)
    assert "max_concurrent" in text_of(busy) and "try again" in text_of(busy)
    assert busy.meta["flexsql/error"]["code"] == "busy"
    assert not results["a"].is_error and "slept" in text_of(results["a"]), text_of(results["a"])
    assert not after.is_error and "2" in text_of(after), text_of(after)


def settings_for_sandbox(**sandbox: Any) -> Any:
    from flexsql.config import Settings

    return Settings(sandbox=SandboxConfig(**{**TEST_SANDBOX.model_dump(), "enabled": True, **sandbox}))


@pytest.mark.integration
def test_run_python_queues_for_a_sandbox_within_its_wait(tmp_path: Path) -> None:
    """Agent stages and clients share the cap (it is the process's): a call beyond it waits for
    the running one, then runs."""
    ctx = python_context(tmp_path, max_concurrent=1, queue_wait_s=60)
    out: dict[str, Any] = {}
    anyio.run(until, lambda: SANDBOX_SLOTS.running == 0, "no program of an earlier test still runs")

    def call(name: str, code: str) -> None:
        out[name] = run_python(ctx, RunPython(code=code))

    first = threading.Thread(target=call, args=("a", "import time\ntime.sleep(2)\n'first'"))
    first.start()
    anyio.run(until, lambda: SANDBOX_SLOTS.running == 1, "the first program is running")
    second = threading.Thread(target=call, args=("b", "'second'"))
    second.start()
    anyio.run(until, lambda: SANDBOX_SLOTS.waiting == 1 or "b" in out, "the second call queues")
    first.join(60)
    second.join(60)
    assert out["a"].ok and out["a"].value_repr == "'first'", out["a"]
    assert out["b"].ok and out["b"].value_repr == "'second'", out["b"]


# -- conversation files ---------------------------------------------------------------------------


async def test_conversation_files_beyond_the_cap_are_pruned_oldest_first(shop: Shop, tmp_path: Path) -> None:
    folder = tmp_path / "conversations"
    script = StageScript(plans={"count every order": COUNT_SQL})
    with OpenAIStub(script) as stub:
        agent = {
            "plans": 1,
            "evaluate": False,
            "conversations_dir": str(folder),
            "max_conversation_files": 3,
        }
        server = build_server(settings_for(stub, agent=agent), shop.sources)
        async with Client(server) as client:  # in-process: the one local client
            for i in range(1, 6):
                out = await client.call_tool(
                    "ask", {"question": f"How many orders? (c{i})", "conversation_id": f"c{i}"}
                )
                assert out.structured_content["status"] == "answered", text_of(out)
            assert sorted(p.name for p in folder.glob("*.json")) == ["c3.json", "c4.json", "c5.json"]
            mark = len(stub.requests)
            await client.call_tool(
                "ask", {"question": "And shipped ones? (c5 again)", "conversation_id": "c5"}
            )
            continued = "\n".join(r.text for r in stub.requests[mark:])
            mark = len(stub.requests)
            await client.call_tool(
                "ask", {"question": "And shipped ones? (c1 again)", "conversation_id": "c1"}
            )
            restarted = "\n".join(r.text for r in stub.requests[mark:])
    assert "How many orders? (c5)" in continued  # a kept conversation continues
    assert "How many orders? (c1)" not in restarted  # a pruned one starts over
    assert sorted(p.name for p in folder.glob("*.json")) == ["c1.json", "c4.json", "c5.json"]


def test_the_file_cap_counts_every_principals_folder(tmp_path: Path) -> None:
    root = tmp_path / "conversations"
    stores = [
        ConversationStore(root, max_files=4, root=root),
        ConversationStore(root / "p-one", max_files=4, root=root),
        ConversationStore(root / "p-two", max_files=4, root=root),
    ]
    for i in range(9):
        stores[i % 3].append(f"c{i}", Turn(question=f"question {i}"))
    # nine conversations in three folders, four kept: the newest, wherever they are
    assert {p.stem for p in root.rglob("*.json")} == {"c5", "c6", "c7", "c8"}
