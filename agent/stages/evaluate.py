"""evaluate: a hard look at the question, the plan, the program and its result — `ok`, or the
fault is in the `plan` (→ revise_plan) or the `implementation` (→ repair with the feedback). It runs
on the plan's branch, after the implementation: the program and what its implementer checked are
above it."""

from __future__ import annotations

from flexsql.agent.context import Thread, fill
from flexsql.agent.contract import Program, Verdict
from flexsql.agent.stages.chat import Run, converse
from flexsql.agent.stages.implement import fenced, plan_label
from flexsql.prompts import tool_conditional

INSTRUCTION = (
    "[evaluate] {siblings}{Which}'s program, as flexsql ran it:\n{program}\nIts result:\n{result}\n\n"
    "Try to prove it wrong; accept it only when the probes fail to. Check the output's shape first (the "
    "asked columns, grain, order and units), then every condition the question sets, then probe: recompute a "
    "number another way, check each filter literal is stored, count rows around each join, look at the "
    "boundaries.{compare} Answer with the evaluate object."
)
COMPARE = (
    "{+compare_results} compare_results tells whether it agrees with the other candidates.{/+compare_results}"
)


async def evaluate(
    run: Run,
    thread: Thread,
    program: Program,
    result: str,
    number: int | None,
    branch: int,
    siblings: str | None = None,
) -> Verdict:
    """`siblings`: the other candidates so far (result ids, readings, shapes, first rows), so the
    evaluator can compare_results instead of recomputing them; listed before this plan's program."""
    others = f"The other candidates so far (their results are stored):\n{siblings}\n\n" if siblings else ""
    offered = frozenset(run.tool_names)
    text = fill(
        tool_conditional(INSTRUCTION, offered),
        siblings=others,
        compare=tool_conditional(COMPARE, offered) if siblings else "",
        Which=plan_label(number).capitalize(),
        program=fenced(program.code, program.language),
        result=result,
    )
    out = await converse(run, "evaluate", thread, text, branch=branch)
    assert isinstance(out, Verdict)
    return out
