"""Asking the user the one clarifying question of an ambiguous turn through MCP elicitation.

Two wires: on 2025-era (legacy) sessions the server asks over the back-channel in the middle of the
tool call (`ctx.elicit`); on 2026-07-28 sessions there is no back-channel, so the `ask` call ends
with an `InputRequiredResult` carrying the elicitation, the client asks the user and calls `ask`
again with the answer and our `request_state` — a random token naming the pending question, kept
per principal (`ToolEnv.principal`: the bearer token's identity on stateless HTTP, never state
shared between principals) and single use. The SDK seals the state (encrypted, 10 minutes, bound to
the tool's arguments and to the token's identity). On stateless HTTP without a token the state is
the only proof of continuity: whoever holds it answers the question, as with a conversation id. A
client without the elicitation capability, or a user who declines, gets `needs_clarification` with
the question instead.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from collections import OrderedDict
from typing import Any, Literal

from mcp import types
from mcp.server.elicitation import render_elicitation_schema
from pydantic import BaseModel, Field, ValidationError, create_model

from flexsql.agent.answer import Answer
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.runtime.registry import Principal

INPUT_KEY = "clarify"
MAX_PENDING = 32  # per session: questions asked and not answered yet


class Pending(BaseModel):
    question: str
    source: str | None = None
    conversation_id: str | None = None
    external_knowledge: str | None = None
    answer: Answer  # the needs_clarification answer, returned as it is if the user declines


def can_elicit(ctx: Any) -> bool:
    try:
        caps = ctx.client_capabilities
    except Exception:  # outside a request
        return False
    return caps is not None and getattr(caps, "elicitation", None) is not None


def has_back_channel(ctx: Any) -> bool:
    try:
        return bool(getattr(ctx.session, "can_send_request", False))
    except Exception:
        return False


def _schema(answer: Answer) -> type[BaseModel]:
    """One field: a choice among 2-6 readings, else free text."""
    readings = [r for r in answer.readings if r][:6]
    field_type: Any = Literal[tuple(readings)] if 2 <= len(readings) <= 6 else str
    return create_model("Clarification", answer=(field_type, Field(description=_question(answer))))


def _question(answer: Answer) -> str:
    return answer.clarifying_question or "Which reading of the question do you mean?"


async def ask_now(ctx: Any, answer: Answer) -> str | None:
    """Legacy sessions: ask over the back-channel; None when the client cannot or the user declines."""
    if ctx is None or not can_elicit(ctx) or not has_back_channel(ctx):
        return None
    try:
        outcome = await ctx.elicit(_question(answer), _schema(answer))
    except Exception:  # the client failed the request: answer needs_clarification instead
        return None
    return str(outcome.data.answer) if getattr(outcome, "action", None) == "accept" else None


def input_requests(answer: Answer) -> dict[str, Any]:
    """The elicitation of a 2026-07-28 `InputRequiredResult`."""
    params = types.ElicitRequestFormParams(
        message=_question(answer), requested_schema=render_elicitation_schema(_schema(answer))
    )
    return {INPUT_KEY: types.ElicitRequest(params=params)}


def reply_from(responses: Any, answer: Answer) -> str | None:
    """The user's answer from the client's input responses; None if declined, cancelled or invalid."""
    response = (responses or {}).get(INPUT_KEY)
    if response is None or getattr(response, "action", None) != "accept":
        return None
    try:
        # the model is built at run time (create_model), so mypy cannot see its one field
        return str(_schema(answer).model_validate(response.content or {}).answer)  # type: ignore[attr-defined]
    except ValidationError:
        return None


def clarified(question: str, asked: str | None, reply: str) -> str:
    return (
        f'{question}\n(The user clarified, when asked "{asked}": {reply}. Treat the question as answerable '
        "with this reading.)"
    )


# pending questions by session context, then by principal, then by token
_PENDING: weakref.WeakKeyDictionary[Any, dict[str, OrderedDict[str, Pending]]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
MAX_PRINCIPALS = 64  # per session context (the stateless one serves every token)


def remember(tools: ToolContext, principal: Principal, pending: Pending) -> str:
    """Keep a pending question for this principal of the session; the token is its capability."""
    token = "clarify_" + secrets.token_urlsafe(16)
    with _LOCK:
        principals = _PENDING.setdefault(tools.results, OrderedDict())
        waiting = principals.pop(principal.key, None) or OrderedDict()
        principals[principal.key] = waiting  # the most recently used principal last
        while len(principals) > MAX_PRINCIPALS:
            del principals[next(iter(principals))]
        waiting[token] = pending
        while len(waiting) > MAX_PENDING:
            waiting.popitem(last=False)
    return token


def take(tools: ToolContext, principal: Principal, token: str | None) -> Pending | None:
    """The pending question `token` names, if this principal asked it; once."""
    if not token:
        return None
    with _LOCK:
        waiting = _PENDING.get(tools.results, {}).get(principal.key)
        return waiting.pop(token, None) if waiting is not None else None
