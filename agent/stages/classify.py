"""classify: is the question answerable here, ambiguous, unanswerable with this schema, or not a
question at all (CoSQL / QDA-SQL's categories)?"""

from __future__ import annotations

from flexsql.agent.contract import Classification
from flexsql.agent.stages.chat import Run, converse, system_message
from flexsql.prompts import render

ROLE = (
    "You are the intake step of a text-to-SQL agent. Decide the question's type before anyone writes SQL: "
    "answerable (one clear reading the data supports, or a follow-up that refines an earlier turn), ambiguous "
    "(readings that give different answers and no way to choose — give the one clarifying question), "
    "unanswerable (the database lacks what it needs — say what is missing), improper (greetings, thanks, "
    "chit-chat — give a short reply). Prefer answerable when a reasonable default reading exists."
)
TOOLS = ["search_schema", "list_tables", "describe_table", "find_values"]


async def classify(run: Run) -> Classification:
    user = render(
        "clarify",
        question=run.question,
        conversation=run.conversation,
        source=run.source,
        external_knowledge=run.knowledge or run.external_knowledge,
        schema_notes=run.schema_notes,
    )
    out = await converse(run, "classify", system_message("classify", ROLE, run), user, TOOLS)
    assert isinstance(out, Classification)
    return out
