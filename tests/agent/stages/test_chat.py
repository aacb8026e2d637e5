"""A stage's request names the tools it offers, and only those: for a model that takes no tools
(an MCP client's sampling without `sampling.tools`) the request names none."""

from __future__ import annotations

import re
from types import SimpleNamespace

from flexsql.agent.budget import Budget
from flexsql.agent.stages import classify
from flexsql.agent.stages.chat import Run, system_message
from flexsql.agent.trace import Trace
from flexsql.config import Settings
from flexsql.prompts import render
from flexsql.tools.engines import SourceRegistry
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.toolbox import TOOLS

TOOL_NAME = re.compile(r"\b(" + "|".join(t.name for t in TOOLS.available(True)) + r")\b")


def _run(tools_enabled: bool) -> Run:
    model = SimpleNamespace(tools_enabled=tools_enabled)
    return Run(
        run_id="t",
        question="How many orders?",
        tools=ToolContext(sources=SourceRegistry([])),
        settings=Settings(),
        model_for=lambda stage: model,  # type: ignore[arg-type,return-value]
        trace=Trace("t"),
        budget=Budget(10, 10_000, 60.0),
        source="shop",
        dialect="duckdb",
    )


def test_a_model_without_tools_is_told_of_none() -> None:
    run = _run(tools_enabled=False)
    assert run.offered(classify.TOOLS, "classify") == []
    system = system_message("classify", classify.ROLE, run, tools=classify.TOOLS)["content"]
    assert "This step has no tools" in system and "stop calling tools" not in system
    user = render(
        "clarify", voice="agent", tools=frozenset(run.offered(classify.TOOLS, "classify")), question="q"
    )
    assert not TOOL_NAME.findall(user)


def test_a_model_with_tools_is_told_exactly_the_offered_ones() -> None:
    run = _run(tools_enabled=True)
    offered = run.offered(classify.TOOLS, "classify")
    assert set(offered) == set(classify.TOOLS)
    system = system_message("classify", classify.ROLE, run, tools=classify.TOOLS)["content"]
    assert f"Tools in this step: {', '.join(offered)}." in system
