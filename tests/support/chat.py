"""A model request as the agent's stages send it, for the tests of the model backends (tests/agent/models)."""

from __future__ import annotations

from flexsql.agent.models import ChatRequest

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_schema",
        "description": "rank tables and columns for a query",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}

LINK_SCHEMA = {
    "type": "object",
    "properties": {"tables": {"type": "array", "items": {"type": "string"}}, "notes": {"type": "string"}},
    "required": ["tables", "notes"],
}


def request(
    stage: str = "link",
    *,
    tools: bool = False,
    schema: bool = False,
    text: str = "how many orders?",
    run_id: str = "q-1",
) -> ChatRequest:
    return ChatRequest(
        stage=stage,
        run_id=run_id,
        messages=[{"role": "system", "content": "You link schemas."}, {"role": "user", "content": text}],
        tools=[SEARCH] if tools else None,
        response_schema=LINK_SCHEMA if schema else None,
    )
