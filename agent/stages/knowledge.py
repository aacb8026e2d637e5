"""knowledge: an external-knowledge document condensed to what the question needs (FlexSQL gives
every later prompt this summary, not the raw document)."""

from __future__ import annotations

from flexsql.agent.contract import Knowledge
from flexsql.agent.stages.chat import Run, converse, system_message

ROLE = (
    "You condense a reference document for a text-to-SQL agent: keep every definition, formula, code "
    "meaning, threshold and business rule the question needs, verbatim where exact; drop the rest."
)
MAX_DOC_CHARS = 60_000


async def knowledge(run: Run, document: str) -> Knowledge:
    doc = document if len(document) <= MAX_DOC_CHARS else document[:MAX_DOC_CHARS] + "\n… (document cut)"
    user = f"Question: {run.question}\n\nDocument:\n{doc}\n\nSummarise what the question needs."
    out = await converse(run, "knowledge", system_message("knowledge", ROLE, run, tools=[]), user)
    assert isinstance(out, Knowledge)
    return out
