"""What the agent's pipeline itself costs, with an instant scripted model on the demo database.

Per question at K=4: wall time, the time spent executing tools (queries, describe_table, the
sandbox), and the rest — the pipeline's own overhead (prompt rendering, parsing, selection,
tracing) — plus model calls and tool calls. Then K=8 with 4 questions at a time over 100 questions:
throughput in questions/s. Prints a table, writes benchmarks/results/agent_overhead.json.

    python benchmarks/agent_overhead.py [--questions 100]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

import anyio
from rich.console import Console
from rich.table import Table

from flexsql.agent.models.scripted import ScriptedModel
from flexsql.agent.pipeline import Question, answer
from flexsql.config import Settings
from flexsql.demo_db.cache import demo_url
from flexsql.server.sessions import SessionState
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime import registry

QUESTIONS = [
    ("How many orders are there?", "SELECT count(*) AS n FROM orders"),
    ("How many customers per loyalty tier?", "SELECT loyalty_tier, count(*) AS n FROM customers GROUP BY 1"),
    (
        "What are the 5 most expensive products?",
        "SELECT product_name, list_price FROM products ORDER BY list_price DESC LIMIT 5",
    ),
    ("How many order items are there?", "SELECT count(*) FROM order_items"),
]

_tool_seconds = {"total": 0.0}
_real_acall = registry.Tools.acall


async def _timed_acall(*args, **kwargs):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    try:
        return await _real_acall(*args, **kwargs)
    finally:
        _tool_seconds["total"] += time.perf_counter() - started


def script_for(sql: str):  # type: ignore[no-untyped-def]
    def script(req):  # type: ignore[no-untyped-def]
        if req.stage == "classify":
            return {"type": "answerable", "clarifying_question": None, "reason": None, "reply": None}
        if req.stage == "link":
            if not any(m.get("role") == "tool" for m in req.messages[-2:]):  # this step's own calls
                return {"tool_calls": [("describe_table", {"table": "orders"})]}
            return {"tables": ["orders"], "notes": ""}
        if req.stage == "plan":
            k = int(re.search(r"Write exactly (\d+) plans", req.messages[-1]["content"]).group(1))
            return {
                "plans": [{"reading": f"r{i}", "text": f"plan {i}", "tables": ["orders"]} for i in range(k)]
            }
        if req.stage in ("implement", "repair"):
            return {"language": "sql", "code": sql}
        if req.stage == "evaluate":
            return {"verdict": "ok", "feedback": ""}
        raise AssertionError(req.stage)

    return script


async def one(tc, settings, k: int, question: str, sql: str) -> dict:  # type: ignore[no-untyped-def]
    model = ScriptedModel(script_for(sql))
    before = _tool_seconds["total"]
    started = time.perf_counter()
    result = await answer(tc, settings, lambda stage: model, Question(question=question, plans=k))
    wall = time.perf_counter() - started
    tools = _tool_seconds["total"] - before
    assert result.status == "answered", result.reason
    return {
        "wall_s": wall,
        "tool_s": tools,
        "overhead_s": max(0.0, wall - tools),
        "model_calls": result.usage.model_calls,
        "tool_calls": result.usage.tool_calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=12, help="K=4 single-question runs")
    args = parser.parse_args()
    registry.Tools.acall = _timed_acall  # type: ignore[method-assign]  # every tool call, agent and pipeline
    sources = SourceRegistry()
    sources.add(open_source(demo_url(), name="demo"))
    settings = Settings()
    state = SessionState(sources, settings)

    # Plans one at a time here, so tool calls never overlap and wall − tool time is the pipeline's own time.
    serial = settings.model_copy(update={"agent": settings.agent.model_copy(update={"plan_concurrency": 1})})

    async def k4(conf: Settings) -> list[dict]:
        runs = []
        for i in range(args.repeat):
            q, sql = QUESTIONS[i % len(QUESTIONS)]
            runs.append(await one(state.new_context(), conf, 4, q, sql))
        return runs[2:]  # the first runs warm the catalog and the sandbox

    single = anyio.run(k4, serial)
    concurrent = anyio.run(k4, settings)

    async def k8_parallel() -> float:
        limiter = anyio.CapacityLimiter(4)
        started = time.perf_counter()

        async def go(i: int) -> None:
            async with limiter:
                q, sql = QUESTIONS[i % len(QUESTIONS)]
                await one(state.new_context(), settings, 8, q, sql)

        async with anyio.create_task_group() as group:
            for i in range(args.questions):
                group.start_soon(go, i)
        return time.perf_counter() - started

    wall8 = anyio.run(k8_parallel)
    med = {key: statistics.median(r[key] for r in single) for key in single[0]}
    table = Table(title="agent pipeline overhead (instant scripted model, demo database)")
    for col in ("setting", "wall s", "tools s", "pipeline s", "model calls", "tool calls", "questions/s"):
        table.add_column(col, justify="right")
    table.add_row(
        "K=4, plans in turn (median)",
        f"{med['wall_s']:.3f}",
        f"{med['tool_s']:.3f}",
        f"{med['overhead_s']:.3f}",
        f"{med['model_calls']:g}",
        f"{med['tool_calls']:g}",
        f"{1 / med['wall_s']:.1f}",
    )
    wall_c = statistics.median(r["wall_s"] for r in concurrent)
    table.add_row("K=4, plans concurrent (median)", f"{wall_c:.3f}", "", "", "", "", f"{1 / wall_c:.1f}")
    table.add_row(
        f"K=8, --jobs 4, {args.questions} questions",
        f"{wall8:.2f}",
        "",
        "",
        "",
        "",
        f"{args.questions / wall8:.1f}",
    )
    Console(width=150).print(table)
    out = Path(__file__).parent / "results" / "agent_overhead.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "k4_median": med,
                "k4_runs": single,
                "k4_concurrent_wall_s": wall_c,
                "k8_jobs4": {
                    "questions": args.questions,
                    "wall_s": wall8,
                    "questions_per_s": args.questions / wall8,
                },
            },
            indent=2,
        )
    )
    sources.close()


if __name__ == "__main__":
    main()
