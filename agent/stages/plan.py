"""plan: K diverse plans in one request, covering the question's different readings (FlexSQL's
step 1), then plan-level revision when an evaluator says the plan itself was wrong."""

from __future__ import annotations

from flexsql.agent.contract import Plan, Plans
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.agent.stages.link import known_tables
from flexsql.prompts import render

ROLE = (
    "You are the planning step of a text-to-SQL agent. Write diverse plans in words (no SQL) that cover the "
    "question's different valid readings; when there is one reading, give it independent methods so that "
    "disagreement exposes mistakes. Mark code, enum and ID literals for grounding with the value tools."
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


async def make_plans(run: Run, k: int) -> list[Plan]:
    user = render(
        "plan",
        question=run.question,
        source=run.source,
        external_knowledge=run.knowledge,
        conversation=run.conversation,
        schema_notes=run.schema_notes,
    )
    out = await converse(run, "plan", system_message("plan", ROLE, run, plans=k), user, TOOLS, plans=k)
    assert isinstance(out, Plans)
    plans = [_checked(run, p) for p in out.plans[:k]]
    if len(out.plans) != k:
        run.trace.event("plan_count", asked=k, got=len(out.plans))
    return plans


async def revise_plan(run: Run, plan: Plan, feedback: str, program: str | None, result: str | None) -> Plan:
    user = render(
        "revise_plan",
        question=run.question,
        plan=plan.text,
        feedback=feedback or "(no detail given)",
        program=program,
        result=result,
        external_knowledge=run.knowledge,
        source=run.source,
    )
    out = await converse(run, "revise_plan", system_message("revise_plan", REVISE_ROLE, run), user, TOOLS)
    assert isinstance(out, Plan)
    return _checked(run, out)
