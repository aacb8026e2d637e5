"""evaluate: a fresh look at the question, the plan, the program and its result — `ok`, or the
fault is in the `plan` (→ revise_plan) or the `implementation` (→ repair with the feedback)."""

from __future__ import annotations

from flexsql.agent.contract import Plan, Program, Verdict
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.prompts import render

ROLE = (
    "You are the evaluator of a text-to-SQL agent. Try to prove the candidate answer wrong with probes "
    "against the data; accept it only when they fail to. Verdict: ok, implementation (the plan was right, "
    "the code is wrong) or plan (wrong reading, table, definition, window or output shape), with feedback."
)
TOOLS = [
    "run_query",
    "describe_table",
    "distinct_values",
    "find_values",
    "sample_rows",
    "compare_results",
    "run_python",
]


async def evaluate(run: Run, plan: Plan, program: Program, result: str) -> Verdict:
    user = render(
        "verify",
        question=run.question,
        result=result,
        program=program.code,
        plan=plan.text,
        external_knowledge=run.knowledge,
        source=run.source,
    )
    out = await converse(run, "evaluate", system_message("evaluate", ROLE, run), user, TOOLS)
    assert isinstance(out, Verdict)
    return out
