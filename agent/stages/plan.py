"""plan: K diverse plans in one request, covering the question's different readings (FlexSQL's
step 1), then plan-level revision when an evaluator says the plan itself was wrong."""

from __future__ import annotations

from flexsql.agent.context import Thread, fill
from flexsql.agent.contract import Plan, Plans
from flexsql.agent.stages.chat import Run, converse
from flexsql.agent.stages.implement import plan_label
from flexsql.agent.stages.link import known_tables
from flexsql.prompts import tool_conditional

SEVERAL = (
    "[plan] Write exactly {k} plans. Give each reading that would change the result its own plan, the most "
    "likely first; when there are fewer such readings than plans, give the most likely reading the other "
    "plans, each by an independent method (another join key, another date column, counting from the other "
    "table), so that a disagreement between results exposes a mistake."
)
ONE = "[plan] Write exactly 1 plan: the most likely reading, by its most direct method."
COMMON = (
    " Plans are in words, with no SQL, and each is implemented on its own: never refer to another plan. A plan's "
    "`text` gives the steps in order; the tables, columns and join keys; each filter, with the stored spelling of "
    "every code, status, enum or ID literal{+find_values} (look it up first when it is not above){/+find_values}; "
    "the output columns in order, their grain, units and rounding; and the one check most likely to show the plan "
    "wrong. `intent` restates the question: what is returned, for whom, where, when (the window, its boundaries "
    "and which date column) and how it is measured. Answer with the plan object."
)
REVISE = (
    "[revise_plan] Your evaluation judged {which} itself wrong. Check the feedback against the data "
    "first: an evaluator can be wrong, and when the evidence contradicts it, keep the plan and say why in its "
    "text. Change the wrong decision and what depends on it; keep the rest. Answer with the revise_plan object."
)


def _checked(run: Run, plan: Plan) -> Plan:
    tables, unknown = known_tables(run, plan.tables)
    if unknown:
        run.trace.event("unknown_tables", stage="plan", tables=unknown)
    return plan.model_copy(update={"tables": tables})  # names the catalog lacks are traced, not kept


async def make_plans(run: Run, thread: Thread, k: int, unknown: list[str] | None = None) -> Plans:
    """K plans, with the intent and the readings (most likely first); each plan's reading ranked.
    `unknown`: tables the link step named that the catalog lacks (the plans are told)."""
    text = (SEVERAL.format(k=k) if k > 1 else ONE) + tool_conditional(COMMON, frozenset(run.tool_names))
    if unknown:
        text += f" (The link step named tables that are not in the catalog: {', '.join(unknown)}.)"
    out = await converse(run, "plan", thread, text, plans=k)
    assert isinstance(out, Plans)
    plans = [_ranked(out.readings, _checked(run, p)) for p in out.plans[:k]]
    if len(out.plans) != k:
        run.trace.event("plan_count", asked=k, got=len(out.plans))
    return out.model_copy(update={"plans": plans})


def _ranked(readings: list[str], plan: Plan) -> Plan:
    """A plan without a rank takes its reading's place in the readings list, when it is there."""
    if plan.rank is not None:
        return plan
    wanted = " ".join(plan.reading.lower().split())
    for i, reading in enumerate(readings, 1):
        if " ".join(reading.lower().split()) == wanted:
            return plan.model_copy(update={"rank": i})
    return plan


async def revise_plan(run: Run, thread: Thread, plan: Plan, number: int | None, branch: int) -> Plan:
    """The evaluator's verdict and feedback are on `thread` (the plan's branch), just above.
    `number`: the plan's number among several (None: the only plan)."""
    out = await converse(run, "revise_plan", thread, fill(REVISE, which=plan_label(number)), branch=branch)
    assert isinstance(out, Plan)
    revised = _checked(run, out)
    return revised if revised.rank is not None else revised.model_copy(update={"rank": plan.rank})
