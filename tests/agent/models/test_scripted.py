"""The scripted model (agent/models/scripted.py): answers from a function or a list of replies, records
each request, and says so when a list runs out."""

from __future__ import annotations

import json

import pytest

from flexsql.agent.models import ChatRequest, ModelError, ModelReply, ScriptedModel, assistant_message
from tests.support.chat import request


@pytest.mark.anyio
async def test_scripted_model_answers_and_records():
    def script(req: ChatRequest):
        if req.stage == "link" and not any(m.get("role") == "tool" for m in req.messages):
            return {"tool_calls": [("search_schema", {"query": "orders"})], "reasoning": "look first"}
        if req.stage == "link":
            return {"tables": ["orders"], "notes": ""}
        return "plain text"

    m = ScriptedModel(script)
    call = await m.complete(request())
    assert call.tool_calls[0].name == "search_schema" and json.loads(call.tool_calls[0].arguments) == {
        "query": "orders"
    }
    assert call.reasoning == "look first" and call.usage.completion_tokens > 0
    done = await m.complete(
        ChatRequest(
            stage="link",
            run_id="q",
            messages=[
                assistant_message(call),
                {"role": "tool", "tool_call_id": call.tool_calls[0].id, "content": "…"},
            ],
        )
    )
    assert json.loads(done.content) == {"tables": ["orders"], "notes": ""}
    assert (await m.complete(request(stage="classify"))).content == "plain text"
    assert [r.stage for r in m.requests] == ["link", "link", "classify"]


@pytest.mark.anyio
async def test_scripted_list_runs_out_clearly():
    m = ScriptedModel([ModelReply(content="one")], name="two-step")
    assert (await m.complete(request())).content == "one"
    with pytest.raises(ModelError, match="no reply left for request 2"):
        await m.complete(request())
