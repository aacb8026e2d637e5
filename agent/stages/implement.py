"""implement and repair: a plan becomes one program, SQL or Python over run_python (the model
decides); an execution error or an evaluator's "implementation" verdict goes back to the model
(code-level repair)."""

from __future__ import annotations

import re

from flexsql.agent.contract import Plan, Program
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.prompts import render

ROLE = (
    "You are the implementation step of a text-to-SQL agent. Turn the plan into ONE program that answers "
    'the question: a SQL query in the source\'s dialect, or Python (language "python") whose last expression '
    "is a pandas DataFrame — it may call flexsql.sql(\"SELECT …\") and use dfs['rN'] for results you ran. "
    "Ground literals with the value tools and test pieces with run_query before answering."
)
TOOLS = [
    "run_query",
    "validate_sql",
    "describe_table",
    "sample_rows",
    "distinct_values",
    "find_values",
    "find_join_path",
    "run_python",
]
SQL_ROLE = (
    "You are the implementation step of a text-to-SQL agent. Turn the plan into ONE SQL query in the "
    "source's dialect that answers the question (this server runs no Python programs). Ground literals "
    "with the value tools and test pieces with run_query before answering."
)
REPAIR_ROLE = (
    "You repair a program that failed or was judged wrong, keeping the plan. Find the cause with the "
    "tools, change the smallest thing that explains it, and test the fix."
)
_SQL_ONLY_RULE = (
    "1. Write SQL: this server runs no Python programs, so the program is one query in the source's "
    "dialect (CTEs and window functions for the procedural parts)."
)
_PYTHON_RERUN = re.compile(r" or `run_python\([^`]*\)`")


def sql_only(prompt: str) -> str:
    """A prompt for a run without run_python ([sandbox] enabled = false, or the transport's default):
    its Python advice replaced, so the model is never told of a tool it cannot call."""
    lines = []
    for line in prompt.splitlines():
        line = _PYTHON_RERUN.sub("", line).replace("(```sql or ```python)", "(```sql)")
        if line.startswith("1. Choose the language."):
            line = _SQL_ONLY_RULE
        if "run_python" not in line:
            lines.append(line)
    return "\n".join(lines) + ("\n" if prompt.endswith("\n") else "")


async def implement(run: Run, plan: Plan) -> Program:
    user = render(
        "implement",
        question=run.question,
        plan=plan.text,
        source=run.source,
        dialect=run.dialect,
        external_knowledge=run.knowledge,
        schema_notes=run.schema_notes,
    )
    role = ROLE if run.python else SQL_ROLE
    if not run.python:
        user = sql_only(user)
    out = await converse(run, "implement", system_message("implement", role, run), user, TOOLS)
    assert isinstance(out, Program)
    return out


async def repair(run: Run, plan: Plan, program: Program, error: str, result: str | None = None) -> Program:
    user = render(
        "repair",
        question=run.question,
        program=program.code,
        error=error,
        plan=plan.text,
        result=result,
        source=run.source,
        dialect=run.dialect,
    )
    if not run.python:
        user = sql_only(user)
    out = await converse(run, "repair", system_message("repair", REPAIR_ROLE, run), user, TOOLS)
    assert isinstance(out, Program)
    return out
