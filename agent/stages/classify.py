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
        voice="agent",
        tools=frozenset(run.offered(TOOLS, "classify")),
        question=run.question,
        conversation=run.conversation,
        source=run.source,
        external_knowledge=run.knowledge,  # the knowledge stage ran first: its summary, not the document
        schema_notes=run.notes(),
    )
    system = system_message("classify", ROLE, run, tools=TOOLS)
    out = await converse(run, "classify", system, user, TOOLS)
    assert isinstance(out, Classification)
    if out.readings:
        run.notebook.note("classify", [f"(most likely first) {' | '.join(out.readings)}"], "reading")
    return out
