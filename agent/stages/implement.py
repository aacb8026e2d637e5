"""implement and repair: a plan becomes one program, SQL or Python over run_python (the model
decides); an execution error or an evaluator's "implementation" verdict goes back to the model
(code-level repair)."""

from __future__ import annotations

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


def plan_text(plan: Plan) -> str:
    """The plan as its implementer reads it: its reading (and the reading's rank), then its text."""
    rank = f" (rank {plan.rank} of the readings)" if plan.rank else ""
    return f"reading: {plan.reading}{rank}\n{plan.text}"


async def implement(run: Run, plan: Plan, branch: int | None = None) -> Program:
    """One program for `plan`; `branch` (the plan's index) keeps its findings its own."""
    user = render(
        "implement",
        voice="agent",
        tools=frozenset(run.offered(TOOLS, "implement")),
        question=run.question,
        plan=plan_text(plan),
        source=run.source,
        dialect=run.dialect,
        external_knowledge=run.knowledge,
        schema_notes=run.notes(branch),
    )
    role = ROLE if run.python else SQL_ROLE
    system = system_message("implement", role, run, tools=TOOLS)
    out = await converse(run, "implement", system, user, TOOLS, branch=branch)
    assert isinstance(out, Program)
    return out


async def repair(
    run: Run,
    plan: Plan,
    program: Program,
    error: str,
    result: str | None = None,
    branch: int | None = None,
) -> Program:
    user = render(
        "repair",
        voice="agent",
        tools=frozenset(run.offered(TOOLS, "repair")),
        question=run.question,
        program=program.code,
        error=error,
        plan=plan_text(plan),
        result=result,
        source=run.source,
        dialect=run.dialect,
        schema_notes=run.notes(branch),
    )
    system = system_message("repair", REPAIR_ROLE, run, tools=TOOLS)
    out = await converse(run, "repair", system, user, TOOLS, branch=branch)
    assert isinstance(out, Program)
    return out
