"""implement and repair: a plan becomes one program, SQL or Python over run_python (the model
decides); an execution error or an evaluator's "implementation" verdict goes back to the model
(code-level repair). Each plan works on its own branch of the thread: implementers never see each
other's work."""

from __future__ import annotations

from flexsql.agent.context import Thread, fill
from flexsql.agent.contract import Plan, Program
from flexsql.agent.stages.chat import Run, converse
from flexsql.prompts import tool_conditional

IMPLEMENT = (
    "[implement] Implement {which} as one program that answers the question: a SQL query in this "
    "database's dialect{+run_python}, or Python when the logic is procedural or awkward in SQL (run_python "
    "over stored results; its last expression is the answer table){/+run_python}. Follow the plan; if it "
    "cannot work as written, write the closest program that answers the question.{+run_query} Test the pieces "
    "with run_query before you answer;{/+run_query} flexsql runs the final program itself. Answer with the "
    "implement object.\n\n{plan}"
)
REPAIR_ERROR = (
    "[repair] {Which}'s program failed when flexsql ran it:\n{program}\nError: {error}\n\n"
    "Find the cause{+describe_table} with the tools{/+describe_table}, change the smallest thing that explains "
    "it, and test the fix. If no fix keeps what the plan computes, write the closest program that answers the "
    "question. Answer with the repair object."
)
REPAIR_VERDICT = (
    "[repair] Your evaluation found {which}'s program wrong while its plan is right. Fix the program: change "
    "the smallest thing that explains what the evaluation found, and test the fix. Answer with the repair "
    "object."
)


def plan_label(number: int | None) -> str:
    """How the instructions name a plan: "plan 2" among several, "the plan" when it is the only one."""
    return f"plan {number}" if number is not None else "the plan"


def plan_text(plan: Plan) -> str:
    """The plan as its implementer reads it: its reading (and the reading's rank), then its text."""
    rank = f" (rank {plan.rank} of the readings)" if plan.rank else ""
    return f"reading: {plan.reading}{rank}\n{plan.text}"


def fenced(code: str, language: str) -> str:
    """A program as the thread shows it: verbatim, in a fence the code cannot close."""
    fence = "```"
    while fence in code:
        fence += "`"
    return f"{fence}{language}\n{code}\n{fence}"


async def implement(
    run: Run, thread: Thread, plan: Plan, number: int, k: int, branch: int, revised: bool = False
) -> Program:
    """One program for plan `number` of `k`; the plan is restated last, so the request names it last."""
    if revised:
        label = f"revised plan {number}" if k > 1 else "the revised plan"
    else:
        label = f"plan {number} of {k}" if k > 1 else "the plan"
    text = fill(
        tool_conditional(IMPLEMENT, frozenset(run.tool_names)),
        which=label,
        plan=f"{label[0].upper()}{label[1:]}, {plan_text(plan)}",
    )
    out = await converse(run, "implement", thread, text, branch=branch)
    assert isinstance(out, Program)
    return out


async def repair(
    run: Run, thread: Thread, program: Program, error: str | None, number: int | None, branch: int
) -> Program:
    """`error`: the execution error; None when the evaluator's verdict on `thread` is the reason.
    `number`: the plan's number among several (None: the only plan)."""
    which = plan_label(number)
    if error is None:
        text = fill(REPAIR_VERDICT, which=which)
    else:
        text = fill(
            tool_conditional(REPAIR_ERROR, frozenset(run.tool_names)),
            Which=which.capitalize(),
            program=fenced(program.code, program.language),
            error=error,
        )
    out = await converse(run, "repair", thread, text, branch=branch)
    assert isinstance(out, Program)
    return out
