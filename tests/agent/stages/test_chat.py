"""A run's requests name the tools they offer, and only those: for a model that takes no tools (an
MCP client's sampling without `sampling.tools`) the system text and the instructions name none."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from flexsql.agent.budget import Budget
from flexsql.agent.context import AGENT_TOOLS
from flexsql.agent.stages import classify, implement, link, plan
from flexsql.agent.stages.chat import Run
from flexsql.agent.trace import Trace
from flexsql.config import Settings
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.toolbox import TOOLS
from tests.support.engines import make_sqlite

TOOL_NAME = re.compile(r"\b(" + "|".join(t.name for t in TOOLS.available(True)) + r")\b")


@pytest.fixture
def source_url(tmp_path: Path) -> str:
    return make_sqlite(tmp_path)


def _run(url: str, tools_enabled: bool, python: bool = True) -> Run:
    model = SimpleNamespace(tools_enabled=tools_enabled)
    source = open_source(url, name="shop")
    run = Run(
        run_id="t",
        question="How many orders?",
        tools=ToolContext(sources=SourceRegistry([source])),
        settings=Settings(),
        model_for=lambda stage: model,  # type: ignore[arg-type,return-value]
        trace=Trace("t"),
        budget=Budget(10, 10_000, 60.0),
        source="shop",
        dialect=source.dialect,
        python=python,
    )
    run.prepare()
    return run


INSTRUCTIONS = [
    classify.INSTRUCTION,
    link.INSTRUCTION,
    plan.COMMON,
    implement.IMPLEMENT,
    implement.REPAIR_ERROR,
]


def test_a_model_without_tools_is_told_of_none(source_url: str) -> None:
    from flexsql.prompts import tool_conditional

    run = _run(source_url, tools_enabled=False)
    assert run.tool_names == [] and run.tool_defs == []
    assert not TOOL_NAME.findall(run.system), TOOL_NAME.findall(run.system)
    assert not TOOL_NAME.findall(run.opening)
    for text in INSTRUCTIONS:
        assert not TOOL_NAME.findall(tool_conditional(text, frozenset())), text[:80]


def test_a_model_with_tools_gets_every_agent_tool_in_one_order_without_a_source_argument(
    source_url: str,
) -> None:
    run = _run(source_url, tools_enabled=True)
    assert run.tool_names == list(AGENT_TOOLS)
    assert [d["function"]["name"] for d in run.tool_defs] == list(AGENT_TOOLS)
    for definition in run.tool_defs:  # a run reads its one source: the model never names it
        properties = definition["function"]["parameters"].get("properties", {})
        assert not {"source", "refresh", "timeout_s"} & set(properties), definition
    assert set(TOOL_NAME.findall(run.system)) <= set(run.tool_names)


def test_without_the_sandbox_run_python_is_neither_offered_nor_named(source_url: str) -> None:
    run = _run(source_url, tools_enabled=True, python=False)
    assert "run_python" not in run.tool_names
    assert "run_python" not in run.system and "run_python" not in run.opening
