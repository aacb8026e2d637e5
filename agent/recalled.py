"""What the source's knowledge store (tools/knowledge) knows about a question, for the agent's thread:
the verified queries of similar questions and the document passages that define its terms, recalled
by meaning and by the tables the question links to. They follow the question in the opening message,
so classify, link, plan and every plan's steps read them once, as examples marked with who verified
them — not as answers.
"""

from __future__ import annotations

from flexsql.errors import FlexSQLError
from flexsql.tools.knowledge.recall import recall
from flexsql.tools.runtime.context import ToolContext

QUERIES = 3
PASSAGES = 2


def recalled_examples(tools: ToolContext, source: str, question: str) -> str | None:
    """The recalled queries (whole SQL) and passages as text; None when the store offers nothing."""
    try:
        found = recall(tools, question, source=source, limit=QUERIES, passages=PASSAGES)
    except FlexSQLError:  # a damaged store must not sink the question: recall is an aid
        return None
    lines: list[str] = []
    if found.queries:
        lines.append(
            "Verified queries of this database for similar questions (examples from its knowledge store, "
            "not answers to this question):"
        )
        for i, q in enumerate(found.queries, 1):
            who = " on ".join(x for x in (q.verified_by, (q.verified_at or "")[:10]) if x)
            lines.append(f"{i}. {q.question}" + (f" (verified by {who})" if who else ""))
            if q.evidence:
                lines.append(f"   evidence: {q.evidence}")
            lines.append("   " + q.sql.strip().replace("\n", "\n   "))
    if found.passages:
        lines.append("From its documents:")
        lines += [
            f"- [{p.document}" + (f" — {p.heading}" if p.heading else "") + f"] {p.text}"
            for p in found.passages
        ]
    return "\n".join(lines) or None
