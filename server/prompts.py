"""Register the prompt templates of `flexsql.prompts` as MCP prompts.

Arguments come from each template's front matter, so the Markdown file is the one place that
defines a prompt. `Prompt.render` is overridden because the SDK reports a missing argument as a
bare ValueError, which reaches the client as "Internal server error"; an MCPError with
INVALID_PARAMS carries our message (which argument, what it holds, the full signature) intact.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, PromptArgument, UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from flexsql import prompts
from flexsql.errors import FlexSQLError


class TemplatePrompt(Prompt):
    """An MCP prompt rendered from `prompts/<name>.md`, naming only the tools the server offers."""

    offered: frozenset[str] | None = None

    async def render(self, arguments: dict[str, Any] | None, context: Any) -> list[Message]:
        try:
            text = prompts.render(self.name, tools=self.offered, **(arguments or {}))
        except FlexSQLError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        return [UserMessage(text)]


def _prompt(template: prompts.PromptTemplate, offered: frozenset[str]) -> TemplatePrompt:
    def fn(**params: Any) -> str:
        return template.render(tools=offered, **params)

    return TemplatePrompt(
        offered=offered,
        name=template.name,
        title=template.title,
        description=template.description,
        arguments=[
            PromptArgument(name=a.name, description=a.description, required=a.required)
            for a in template.arguments
        ],
        fn=fn,
    )


def register_prompts(server: MCPServer, offered: frozenset[str]) -> None:
    """Add plan, implement, repair, revise_plan, verify and clarify to `server`, whose tools are
    `offered` (a server without the sandbox: no prompt mentions run_python)."""
    for template in prompts.list_prompts():
        server.add_prompt(_prompt(template, offered))
