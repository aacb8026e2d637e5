"""The one small protocol every model backend speaks: a ChatRequest in, a ModelReply out.

Messages are in OpenAI chat format whatever the backend; each backend translates at its edge.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from flexsql.config import ModelEndpoint
from flexsql.errors import ConfigError
from flexsql.errors import ModelError as ModelError  # re-exported; the one ModelError is flexsql.errors'


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str  # the raw JSON text the model sent; the caller parses (and reports) it
    problem: str | None = None  # why the call cannot run, when the backend already knows (sent back)


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # prompt tokens the server served from its prefix cache (`prompt_tokens_details.cached_tokens`,
    # as vLLM with --enable-prompt-tokens-details and OpenAI report it); 0 when it says nothing
    cached_tokens: int = 0


class ModelReply(BaseModel):
    content: str | None = None
    tool_calls: list[ToolCall] = []
    reasoning: str | None = None
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str | None = None
    elapsed_s: float = 0.0


class ChatRequest(BaseModel):
    stage: str  # classify link knowledge plan implement repair evaluate revise_plan
    run_id: str  # the question id -> header X-FlexSQL-Run
    messages: list[dict[str, Any]]  # OpenAI chat format (system/user/assistant/tool)
    tools: list[dict[str, Any]] | None = None  # OpenAI function definitions
    # "none": the tools stay listed (the prompt's prefix stays the same) but the reply may call none
    tool_choice: Literal["auto", "none"] = "auto"
    response_schema: dict[str, Any] | None = None  # JSON schema of the stage's final JSON object
    schema_name: str | None = None  # defaults to stage

    @property
    def tool_names(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in self.tools or []]


@runtime_checkable
class ChatModel(Protocol):
    name: str  # for traces, e.g. "openai:gpt-oss-120b@http://127.0.0.1:8000/v1" (never a key)

    async def complete(self, request: ChatRequest) -> ModelReply: ...


class ResolvedModelConfig(ModelEndpoint):
    """One stage's effective model settings: [model.stages.X] merged over [model] (factory.resolve);
    the defaults are [model]'s, and an endpoint and a model are required."""

    base_url: str
    model: str


class ModelUnavailable(ConfigError):
    """No model endpoint is configured and no other backend (MCP sampling) is available (code `config`)."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message
            or (
                "no model is configured for the agent: set base_url and model under [model] in flexsql.toml, "
                "or FLEXSQL_MODEL__BASE_URL and FLEXSQL_MODEL__MODEL in the environment, or pass "
                "--base-url and --model (e.g. --base-url http://127.0.0.1:8000/v1 --model openai/gpt-oss-120b); "
                "put an API key in an environment variable and name it with api_key_env / --api-key-env"
            )
        )


def assistant_message(reply: ModelReply) -> dict[str, Any]:
    """The assistant turn to append to the history after `reply`.

    Reasoning is echoed back because gpt-oss and Qwen3 restart (and degrade) when their earlier
    reasoning vanishes between tool turns. vLLM reads `reasoning` on input (it replaced
    `reasoning_content`); older vLLM, llama.cpp and Qwen3's chat template read `reasoning_content`,
    so both are sent, and only when there is reasoning (OpenAI itself never returns any).
    """
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    elif message["content"] is None:
        message["content"] = ""
    if reply.reasoning:
        message["reasoning"] = reply.reasoning
        message["reasoning_content"] = reply.reasoning
    return message


class Stopwatch:
    """Elapsed seconds since creation (monotonic), for ModelReply.elapsed_s."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._start
