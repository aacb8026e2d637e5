"""Model backends of the agent: one protocol (ChatModel), OpenAI-compatible, MCP sampling, scripted."""

from flexsql.agent.models.base import (
    ChatModel,
    ChatRequest,
    ModelError,
    ModelReply,
    ModelUnavailable,
    ResolvedModelConfig,
    ToolCall,
    Usage,
    assistant_message,
)
from flexsql.agent.models.factory import configured, model_for_stage, resolve
from flexsql.agent.models.openai_compat import OpenAICompatModel
from flexsql.agent.models.sampling import SamplingModel, supports_sampling, supports_sampling_tools
from flexsql.agent.models.scripted import ScriptedModel

__all__ = [
    "ChatModel",
    "ChatRequest",
    "ModelError",
    "ModelReply",
    "ModelUnavailable",
    "OpenAICompatModel",
    "ResolvedModelConfig",
    "SamplingModel",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "assistant_message",
    "configured",
    "model_for_stage",
    "resolve",
    "supports_sampling",
    "supports_sampling_tools",
]
