"""`flexsql demo`: the FlexSQL way on the bundled demo database, through a real MCP client talking
to `flexsql serve` over stdio. No model is needed: the steps an agent would take are scripted."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import anyio
from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule


@dataclass
class Step:
    title: str
    why: str
    tool: str
    args: dict[str, Any]


def _steps(question: str, exact_sql: str, grounded_sql: str) -> list[Step]:
    return [
        Step(
            "Explore",
            "See what is there; monthly shards collapse into one family entry.",
            "list_tables",
            {"limit": 30},
        ),
        Step(
            "Link the question to the schema",
            "Rank tables and columns for the question instead of dumping the schema.",
            "search_schema",
            {"query": question, "limit": 6},
        ),
        Step(
            "Read a table",
            "Columns, keys, comments and real example values.",
            "describe_table",
            {"table": "orders"},
        ),
        Step(
            "Ground a code",
            "'shipped' is not stored as a word: find the exact code.",
            "distinct_values",
            {"table": "orders", "column": "status"},
        ),
        Step(
            "Ground a name",
            "Which column holds France, and how is it spelled?",
            "find_values",
            {"text": "France", "limit": 5},
        ),
        Step(
            "Candidate A: literal match",
            "A first reading: country = 'France' exactly.",
            "run_query",
            {"sql": exact_sql},
        ),
        Step(
            "Candidate B: grounded match",
            "The reading the value tools support: every spelling of France.",
            "run_query",
            {"sql": grounded_sql},
        ),
        Step(
            "Compare the candidates",
            "Execution decides: do the two readings agree?",
            "compare_results",
            {"result_ids": ["$A", "$B"]},
        ),
        Step(
            "Check in Python",
            "Share of revenue per category, computed from B's rows in the sandbox.",
            "run_python",
            {
                "code": "df.assign(share=(df.net_revenue / df.net_revenue.sum()).round(3))",
                "result_ids": ["$B"],
            },
        ),
    ]


async def _walk(url: str, console: Console) -> None:
    from mcp import Client, StdioServerParameters

    from flexsql.demo_db.questions import DEMO_QUESTIONS

    question = DEMO_QUESTIONS[0]
    grounded = question.sql
    exact = grounded.replace("LOWER(TRIM(a.country)) = 'france'", "a.country = 'France'")
    # -P: the working directory is not put on the child's path, so a folder named flexsql/ there
    # (a checkout's parent) cannot shadow the installed package
    params = StdioServerParameters(
        command=sys.executable, args=["-P", "-m", "flexsql.server", "serve", "--db", f"demo={url}"]
    )
    _rule(console, "flexsql demo")
    console.print(f"Question: {question.question}", markup=False)
    console.print(f"Server: flexsql serve --db {url}  (MCP over stdio)\n", markup=False)
    ids: dict[str, str] = {}
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        console.print(f"{len(tools)} tools: {', '.join(sorted(tools))}\n")
        for step in _steps(question.question, exact, grounded):
            if step.tool not in tools:
                continue
            args = {
                k: ([ids.get(x, x) for x in v] if isinstance(v, list) else v) for k, v in step.args.items()
            }
            result = await client.call_tool(step.tool, args)
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            if step.tool == "run_query" and result.structured_content:
                ids["$A" if "$A" not in ids else "$B"] = result.structured_content["result_id"]
            shown = ", ".join(f"{k}={v!r}" if k != "sql" else "sql=…" for k, v in args.items())
            body = text if step.tool != "run_query" else f"{args['sql']}\n\n{text}"
            title = f"{step.title}: {step.tool}({shown})"
            if console.is_terminal:
                console.print(
                    Panel(
                        body,
                        title=title,
                        subtitle=step.why,
                        border_style="red" if result.is_error else "cyan",
                    )
                )
            else:  # piped: plain text, every line whole (a panel's border would wrap and frame each line)
                console.print(f"## {title}\n{step.why}\n\n{body}\n", markup=False, highlight=False)
    _rule(console)
    console.print(f"Grounding that mattered: {question.grounding}.", markup=False)
    console.print("Try it with your own client: flexsql mcp-config", markup=False)
    console.print("One tool: flexsql call describe_table table=orders", markup=False)


def _rule(console: Console, title: str = "") -> None:
    if console.is_terminal:
        console.print(Rule(title))
    else:
        console.print(f"-- {title} --" if title else "--", markup=False)


def run_demo(scale: float = 1.0, console: Console | None = None) -> None:
    """The walkthrough; `console` prints plain unwrapped text when piped (server/cli_support.console)."""
    from flexsql.demo_db.cache import demo_url

    console = console or Console()
    if console.is_terminal:
        with console.status("preparing the demo database (first run only)…"):
            url = demo_url(scale)
    else:
        url = demo_url(scale)
    anyio.run(_walk, url, console)
