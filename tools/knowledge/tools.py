"""The recall and remember tools over a source's knowledge store (store.py)."""

from __future__ import annotations

import getpass

from pydantic import Field

from flexsql.tools.knowledge import recall as recalling
from flexsql.tools.knowledge.learn import RememberResult, remember_query
from flexsql.tools.knowledge.recall import RecallResult
from flexsql.tools.runtime.context import SourceName, ToolContext
from flexsql.tools.runtime.registry import LOCAL, ToolArgs, ToolEnv, tool
from flexsql.tools.runtime.schema import unlisted

QUESTION = Field(min_length=1, max_length=2000, json_schema_extra=unlisted("minLength", "maxLength"))


class Recall(ToolArgs):
    question: str = QUESTION
    limit: int = Field(3, ge=1, le=20)
    source: SourceName = None


@tool(
    "Verified question/SQL pairs and document passages relevant to a question, each with why.",
    agent_tool=False,  # the agent's stages receive recalled examples in their request (agent/)
)
def recall(ctx: ToolContext, args: Recall) -> RecallResult:
    return recalling.recall(ctx, args.question, source=args.source, limit=args.limit)


class Remember(ToolArgs):
    question: str = QUESTION
    sql: str = Field(min_length=1, json_schema_extra=unlisted("minLength"))
    source: SourceName = None


def _who(env: ToolEnv) -> str:
    if env.principal != LOCAL:
        return "an MCP client"  # the principal's key is never shown
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "the local user"


@tool(
    "Store a question with the SQL the user confirmed answers it; the SQL must run.",
    agent_tool=False,
    writes=True,
)
def remember(ctx: ToolContext, args: Remember, env: ToolEnv) -> RememberResult:
    return remember_query(ctx, args.question, args.sql, source=args.source, verified_by=_who(env))


__all__ = ["recall", "remember"]
