"""The OpenAI-compatible model backend (agent/models/openai_compat.py) against the OpenAI stub over
loopback HTTP: headers, tools and raw arguments, reasoning, JSON schema modes, retries, errors that
name what to fix and never the key, the per-endpoint concurrency limit, cancellation."""

from __future__ import annotations

import json
import time
import traceback
from typing import Any

import anyio
import pytest

from flexsql.agent.models import (
    ChatRequest,
    ModelError,
    OpenAICompatModel,
    ResolvedModelConfig,
    assistant_message,
)
from flexsql.agent.models.openai_compat import clean_tool_name, split_think
from tests.support.chat import LINK_SCHEMA, SEARCH, request
from tests.support.openai_stub import Fail, Hang, OpenAIStub, Reply, StubRequest

pytestmark = pytest.mark.anyio

SECRET = "sk-flexsql-DO-NOT-LEAK-7f3a9c"


def model(stub: OpenAIStub, **cfg: Any) -> OpenAICompatModel:
    cfg = {"model": "stub-model", "retry_backoff_s": 0.01, **cfg}
    return OpenAICompatModel(ResolvedModelConfig(base_url=stub.base_url, **cfg))


# -- requests and replies -------------------------------------------------------------------------


async def test_headers_tools_and_raw_tool_arguments():
    raw_args = '{"query":  "orders by month"}'  # odd spacing: must reach the caller untouched

    def script(req: StubRequest):
        if not req.has_tool_results:
            return Reply(tool_calls=[("search_schema", raw_args)], usage=(120, 30))
        return Reply(
            content='{"tables": ["orders"], "notes": "' + req.tool_results[0] + '"}', usage=(200, 12)
        )

    with OpenAIStub(script) as stub:
        m = model(
            stub,
            temperature=0.2,
            max_tokens=512,
            reasoning_effort="low",
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
        first = await m.complete(request(tools=True))
        assert [(c.name, c.arguments) for c in first.tool_calls] == [("search_schema", raw_args)]
        assert first.finish_reason == "tool_calls" and first.usage.prompt_tokens == 120
        history = [
            *request().messages,
            assistant_message(first),
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "orders(order_id, month)"},
        ]
        second = await m.complete(ChatRequest(stage="link", run_id="q-1", messages=history, tools=[SEARCH]))

    assert json.loads(second.content) == {"tables": ["orders"], "notes": "orders(order_id, month)"}
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (200, 12)
    for sent in stub.requests:
        assert (sent.stage, sent.run_id) == ("link", "q-1")
        assert sent.tools == ["search_schema"] and sent.body["tool_choice"] == "auto"
        assert sent.body["temperature"] == 0.2 and sent.body["max_tokens"] == 512
        assert sent.body["reasoning_effort"] == "low"
        assert sent.body["chat_template_kwargs"] == {"enable_thinking": False}  # extra_body at top level
    echoed = stub.requests[1].messages[2]
    assert echoed["tool_calls"][0]["function"] == {"name": "search_schema", "arguments": raw_args}
    assert m.name == f"openai:stub-model@{stub.base_url}"


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
async def test_reasoning_is_kept_and_sent_back_on_tool_turns(field):
    with OpenAIStub(
        [
            Reply(
                tool_calls=[("search_schema", {"query": "x"})],
                reasoning="I should look up x.",
                reasoning_field=field,
            ),
            Reply(content="{}"),
        ]
    ) as stub:
        m = model(stub)
        first = await m.complete(request(tools=True))
        assert first.reasoning == "I should look up x."
        history = [
            *request().messages,
            assistant_message(first),
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "x is a table"},
        ]
        await m.complete(ChatRequest(stage="link", run_id="q-1", messages=history, tools=[SEARCH]))
    echoed = stub.requests[1].messages[2]
    # current vLLM reads `reasoning`, older vLLM / llama.cpp / Qwen3's template `reasoning_content`
    assert echoed["reasoning"] == echoed["reasoning_content"] == "I should look up x."


async def test_think_block_is_split_out_of_content():
    with OpenAIStub([Reply(content='<think>count rows</think>\n{"tables": []}')]) as stub:
        reply = await model(stub).complete(request())
    assert (reply.reasoning, reply.content) == ("count rows", '{"tables": []}')


@pytest.mark.parametrize(
    "content, expected",
    [
        ("<think>a</think>b", ("a", "b")),
        ("  <think>\na\n</think>\n\nb", ("a", "b")),
        ("a</think>b", ("a", "b")),  # Qwen3's template opened the block in the prompt
        ("plain", (None, "plain")),
        ("text <think>x</think> more", (None, "text <think>x</think> more")),
        (None, (None, None)),
    ],
)
def test_split_think(content, expected):
    assert split_think(content) == expected


@pytest.mark.parametrize(
    "name, expected",
    [
        ("search_schema", "search_schema"),
        ("search_schema<|channel|>commentary", "search_schema"),
        ("functions.search_schema", "search_schema"),
        (" describe_table <|constrain|>json", "describe_table"),
        ("drop_everything", "drop_everything"),  # unknown names stay: the caller reports them to the model
    ],
)
def test_gpt_oss_junk_is_cleaned_from_tool_names(name, expected):
    assert clean_tool_name(name, ["search_schema", "describe_table"]) == expected


async def test_tool_call_names_are_cleaned_in_replies():
    with OpenAIStub([Reply(tool_calls=[("search_schema<|channel|>commentary", {"query": "x"})])]) as stub:
        reply = await model(stub).complete(request(tools=True))
    assert reply.tool_calls[0].name == "search_schema"


# -- response_format ------------------------------------------------------------------------------


async def test_json_schema_is_sent_when_the_endpoint_takes_it():
    with OpenAIStub(lambda req: Reply(content='{"tables": [], "notes": ""}')) as stub:
        await model(stub).complete(request(schema=True).model_copy(update={"schema_name": "link answer"}))
    assert stub.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "link_answer", "schema": LINK_SCHEMA},
    }


async def test_auto_retries_without_json_schema_once_rejected_and_remembers():
    with OpenAIStub(
        lambda req: Reply(content='{"tables": [], "notes": ""}'), reject_json_schema=True
    ) as stub:
        m = model(stub)
        assert (await m.complete(request(schema=True))).content == '{"tables": [], "notes": ""}'
        await model(stub, model="other").complete(request(schema=True))  # same endpoint, another object
    sent = ["response_format" in r.body for r in stub.requests]
    assert sent == [True, False, False]


async def test_off_never_sends_json_schema_and_json_schema_mode_fails_clearly():
    with OpenAIStub(lambda req: Reply(content="{}"), reject_json_schema=True) as stub:
        await model(stub, response_format="off").complete(request(schema=True))
        assert "response_format" not in stub.requests[0].body
        with pytest.raises(ModelError, match="HTTP 400.*response_format"):
            await model(stub, response_format="json_schema").complete(request(schema=True))
    assert len(stub.requests) == 2  # a 400 is not retried


async def test_auto_leaves_json_schema_out_when_tools_are_offered():
    # vLLM's structured outputs would suppress tool calls (tool_choice auto): vllm#39929
    with OpenAIStub(lambda req: Reply(content="{}")) as stub:
        await model(stub).complete(request(tools=True, schema=True))
        await model(stub, response_format="json_schema").complete(request(tools=True, schema=True))
    assert ["response_format" in r.body for r in stub.requests] == [False, True]


# -- retries and failures -------------------------------------------------------------------------


async def test_429_with_retry_after_and_500_are_retried():
    with OpenAIStub(
        [
            Fail(429, {"Retry-After": "0.3"}, "slow down"),
            Fail(500, message="engine hiccup"),
            Reply(content="done"),
        ]
    ) as stub:
        reply = await model(stub).complete(request())
    assert reply.content == "done" and len(stub.requests) == 3
    assert stub.requests[1].received_at - stub.requests[0].received_at >= 0.29  # Retry-After honoured


async def test_persistent_500_fails_after_max_retries_with_a_clear_message():
    with OpenAIStub(lambda req: Fail(500, message="CUDA out of memory")) as stub:
        with pytest.raises(ModelError) as caught:
            await model(stub, max_retries=2).complete(request(stage="plan"))
    assert len(stub.requests) == 3
    text = str(caught.value)
    assert "HTTP 500" in text and "CUDA out of memory" in text and "3 attempt" in text
    assert "stage plan" in text and "max_retries" in text


async def test_a_hung_endpoint_fails_within_timeout_s_retries_included():
    """Was: each of max_retries + 1 attempts had timeout_s of its own (timeout_s = 2 took 19.8 s)."""
    with OpenAIStub(lambda req: Hang(3)) as stub:
        with pytest.raises(
            ModelError, match=r"did not answer within 0.3 s \(\[model\] timeout_s, the bound of "
        ):
            await model(stub, timeout_s=0.3, max_retries=3).complete(request())
    assert len(stub.requests) == 1  # nothing left of the bound to retry with


async def test_fast_failures_are_retried_within_timeout_s():
    with OpenAIStub([Fail(500), Fail(503), Reply(content="fine")]) as stub:
        reply = await model(stub, timeout_s=5).complete(request())
    assert reply.content == "fine" and len(stub.requests) == 3


async def test_401_is_not_retried_and_names_the_key_variable(monkeypatch):
    monkeypatch.setenv("FLEXSQL_TEST_MODEL_KEY", SECRET)
    with OpenAIStub(lambda req: Fail(401, message="invalid api key")) as stub:
        with pytest.raises(ModelError, match="FLEXSQL_TEST_MODEL_KEY") as caught:
            await model(stub, api_key_env="FLEXSQL_TEST_MODEL_KEY").complete(request())
    assert len(stub.requests) == 1 and "HTTP 401" in str(caught.value)


async def test_unreachable_endpoint_is_explained():
    from tests.support.mcp_support import free_port

    m = OpenAICompatModel(
        ResolvedModelConfig(
            base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=1, retry_backoff_s=0.01
        )
    )
    with pytest.raises(ModelError, match="cannot be reached.*base_url"):
        await m.complete(request())


async def test_api_key_appears_in_no_error_repr_or_name(monkeypatch):
    monkeypatch.setenv("FLEXSQL_TEST_MODEL_KEY", SECRET)

    def echo_auth(req: StubRequest):  # a hostile server repeats the Authorization header back
        status = 401 if req.stage == "classify" else 500
        return Fail(status, message=f"rejected {req.headers.get('authorization')}")

    failures: list[BaseException] = []
    with OpenAIStub(echo_auth) as stub:
        m = model(stub, api_key_env="FLEXSQL_TEST_MODEL_KEY", max_retries=1)
        for stage in ("classify", "plan"):
            with pytest.raises(ModelError) as caught:
                await m.complete(request(stage=stage))
            failures.append(caught.value)
    assert stub.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # the key is used…
    texts = [repr(m), m.name, str(m.__dict__), str(m.cfg)]
    for exc in failures:
        texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
        assert exc.__context__ is None and exc.__cause__ is None  # no SDK error (with its request) inside
    assert all(SECRET not in t for t in texts)  # …and shown nowhere
    assert "rejected Bearer ***" in str(failures[0])


# -- concurrency and cancellation -----------------------------------------------------------------


async def test_concurrency_limit_is_shared_per_endpoint():
    with OpenAIStub(lambda req: Hang(0.2, Reply(content="ok"))) as stub:
        first, second = model(stub, concurrency=2), model(stub, model="another", concurrency=2)
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon((first if i % 2 else second).complete, request(run_id=f"q-{i}"))
    assert len(stub.requests) == 6 and stub.max_in_flight == 2


def test_concurrency_limit_holds_across_threads_and_event_loops():
    """`flexsql eval --jobs N` runs one event loop per worker thread: the endpoint's limit is the process's."""
    import threading

    with OpenAIStub(lambda req: Hang(0.15, Reply(content="ok"))) as stub:
        shared = model(stub, concurrency=2)

        def worker(i: int) -> None:
            async def go() -> None:
                async with anyio.create_task_group() as tg:
                    for j in range(2):
                        tg.start_soon(shared.complete, request(run_id=f"t{i}-{j}"))

            anyio.run(go)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert len(stub.requests) == 8 and stub.max_in_flight == 2


async def test_cancellation_aborts_the_request_promptly():
    with OpenAIStub(lambda req: Hang(5)) as stub:
        m = model(stub)
        started = time.monotonic()
        with anyio.move_on_after(0.3) as scope:
            await m.complete(request())
        waited = time.monotonic() - started
    assert scope.cancelled_caught and waited < 2.5  # it did not wait for the 5 s answer
    assert len(stub.requests) == 1


async def test_an_unset_key_variable_is_refused_before_any_request(monkeypatch):
    """Was: an api_key_env naming a variable that is not set sent `Authorization: Bearer EMPTY`."""
    from flexsql.errors import ConfigError

    monkeypatch.delenv("FLEXSQL_TEST_UNSET_KEY", raising=False)
    with OpenAIStub(lambda req: Reply(content="hi")) as stub:
        with pytest.raises(ConfigError, match="FLEXSQL_TEST_UNSET_KEY, which is not set"):
            await model(stub, api_key_env="FLEXSQL_TEST_UNSET_KEY").complete(request())
    assert stub.requests == []
