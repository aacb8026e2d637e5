"""evaluate: a fresh look at the question, the plan, the program and its result — `ok`, or the
fault is in the `plan` (→ revise_plan) or the `implementation` (→ repair with the feedback)."""

from __future__ import annotations

from flexsql.agent.contract import Plan, Program, Verdict
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.prompts import render

ROLE = (
    "You are the evaluator of a text-to-SQL agent. Try to prove the candidate answer wrong with probes "
    "against the data; accept it only when they fail to. Verdict: ok, alternative (right for its plan's "
    "reading, but the question more likely means another), implementation (the plan was right, the code is "
    "wrong) or plan (wrong reading, table, definition, window or output shape), with feedback."
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


async def evaluate(
    run: Run,
    plan: Plan,
    program: Program,
    result: str,
    branch: int | None = None,
    siblings: str | None = None,
) -> Verdict:
    """`siblings`: the other candidates so far (result ids, readings, shapes, first rows), so the
    evaluator can compare_results instead of recomputing them."""
    user = render(
        "verify",
        voice="agent",
        tools=frozenset(run.offered(TOOLS, "evaluate")),
        question=run.question,
        result=result,
        program=program.code,
        plan=f"reading: {plan.reading}" + (f" (rank {plan.rank})" if plan.rank else "") + f"\n{plan.text}",
        external_knowledge=run.knowledge,
        source=run.source,
        schema_notes=run.notes(branch),
        candidates=siblings,
    )
    system = system_message("evaluate", ROLE, run, tools=TOOLS)
    out = await converse(run, "evaluate", system, user, TOOLS, branch=branch)
    assert isinstance(out, Verdict)
    return out
