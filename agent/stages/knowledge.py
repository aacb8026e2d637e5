"""knowledge: an external-knowledge document condensed to what the question needs (FlexSQL gives
every later prompt this summary, not the raw document). It runs on a side thread that shares the
run's prefix up to the question: the document itself never rides on the later requests."""

from __future__ import annotations

from flexsql.agent.contract import Knowledge
from flexsql.agent.stages.chat import Run, converse

MAX_DOC_CHARS = 60_000
INSTRUCTION = (
    "[knowledge] Condense this reference document to what the question needs: keep every definition, "
    "formula, code meaning, threshold and business rule it needs, verbatim where exact; drop the rest. "
    'Answer with the knowledge object: {{"summary": str}}.\n\nDocument:\n{doc}'
)


async def knowledge(run: Run, document: str) -> Knowledge:
    doc = document
    if len(doc) > MAX_DOC_CHARS:  # cut at a line end, said so
        doc = doc[:MAX_DOC_CHARS].rsplit("\n", 1)[0] + f"\n… (document cut at {MAX_DOC_CHARS:,} characters)"
    out = await converse(run, "knowledge", run.thread(), INSTRUCTION.format(doc=doc))
    assert isinstance(out, Knowledge)
    return out
