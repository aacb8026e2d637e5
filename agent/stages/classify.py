"""classify: is the question answerable here, ambiguous, unanswerable with this schema, or not a
question at all (CoSQL / QDA-SQL's categories)? It opens the run's thread: the pipeline runs
search_schema for the question first, and its hits are part of this step's instruction, so every
later step reads them once, here."""

from __future__ import annotations

from flexsql.agent.context import Thread, fill
from flexsql.agent.contract import Classification
from flexsql.agent.stages.chat import Run, converse
from flexsql.prompts import tool_conditional

INSTRUCTION = (
    "[classify] Decide whether this database can answer the question. "
    "The schema search ranked these tables and columns for it:\n{hits}\n\n"
    "{+describe_table}Look at the tables, columns or values you are unsure of (describe_table, "
    "find_values, sample_rows), and stop as soon as the type is clear. {/+describe_table}"
    "Answer with the classify object."
)
NOTHING_FOUND = INSTRUCTION.replace(
    "The schema search ranked these tables and columns for it:\n{hits}",
    "The schema search found nothing for it.",
)
IN_CONVERSATION = (
    " Give `standalone`: this turn restated as a question that stands on its own. A follow-up may change one "
    'part of the previous query, add to what it returns ("also give me…" adds columns or rows; it is not a '
    "further filter), or ask something new."
)


async def classify(run: Run, thread: Thread, hits: str) -> Classification:
    """`hits`: search_schema's ranked hits for the question (link.search_hits)."""
    found = ": 0 tables matched" not in hits.split("\n", 1)[0]  # "Thanks!" finds nothing: one line says so
    text = fill(
        tool_conditional(INSTRUCTION if found else NOTHING_FOUND, frozenset(run.tool_names)), hits=hits
    )
    if run.history:
        text += IN_CONVERSATION
    if run.turn_note:
        text = f"{text}\n\n{run.turn_note}"
    out = await converse(run, "classify", thread, text)
    assert isinstance(out, Classification)
    return out
