"""plan: K diverse plans in one request, covering the question's different readings (FlexSQL's
step 1), then plan-level revision when an evaluator says the plan itself was wrong."""

from __future__ import annotations

from flexsql.agent.contract import Plan, Plans
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.agent.stages.implement import plan_text
from flexsql.agent.stages.link import known_tables
from flexsql.prompts import render

ROLE = (
    "You are the planning step of a text-to-SQL agent. Write diverse plans in words (no SQL) that cover the "
    "question's different valid readings; when there is one reading, give it independent methods so that "
    "disagreement exposes mistakes. Give code, enum and ID literals their stored spelling (look it up with "
    "the value tools when it is not known yet)."
)
TOOLS = ["describe_table", "find_join_path", "distinct_values", "find_values", "sample_rows"]
REVISE_ROLE = (
    "You revise a plan that an evaluator judged wrong. Check the feedback against the data first; "
    "change the wrong decision and what depends on it, keep the rest. No SQL."
)


def _checked(run: Run, plan: Plan) -> Plan:
    tables, unknown = known_tables(run, plan.tables)
    if unknown:
        run.trace.event("unknown_tables", stage="plan", tables=unknown)
    return plan.model_copy(update={"tables": tables})  # names the catalog lacks are traced, not kept


async def make_plans(run: Run, k: int) -> Plans:
    """K plans, with the intent and the readings (most likely first); each plan's reading ranked."""
    user = render(
        "plan",
        voice="agent",
        tools=frozenset(run.offered(TOOLS, "plan")),
        question=run.question,
        source=run.source,
        external_knowledge=run.knowledge,
        conversation=run.conversation,
        schema_notes=run.notes(),
    )
    system = system_message("plan", ROLE, run, plans=k, tools=TOOLS)
    out = await converse(run, "plan", system, user, TOOLS, plans=k)
    assert isinstance(out, Plans)
    plans = [_ranked(out.readings, _checked(run, p)) for p in out.plans[:k]]
    if len(out.plans) != k:
        run.trace.event("plan_count", asked=k, got=len(out.plans))
    notes = ([f"intent: {out.intent}"] if out.intent.strip() else []) + [
        f"{i}. {r}" for i, r in enumerate(out.readings, 1)
    ]
    run.notebook.note("plan", notes, "reading")
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


async def revise_plan(
    run: Run,
    plan: Plan,
    feedback: str,
    program: str | None,
    result: str | None,
    branch: int | None = None,
) -> Plan:
    user = render(
        "revise_plan",
        voice="agent",
        tools=frozenset(run.offered(TOOLS, "revise_plan")),
        question=run.question,
        plan=plan_text(plan),
        feedback=feedback or "(no detail given)",
        program=program,
        result=result,
        external_knowledge=run.knowledge,
        source=run.source,
        schema_notes=run.notes(branch),
    )
    system = system_message("revise_plan", REVISE_ROLE, run, tools=TOOLS)
    out = await converse(run, "revise_plan", system, user, TOOLS, branch=branch)
    assert isinstance(out, Plan)
    revised = _checked(run, out)
    return revised if revised.rank is not None else revised.model_copy(update={"rank": plan.rank})
