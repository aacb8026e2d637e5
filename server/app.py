"""The MCP server: registers flexsql's tools (the tools layer's, and the agent's `ask`), prompts and
resources on an `MCPServer`. How a call runs is in flexsql.server.toolkit."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings

from flexsql import __version__
from flexsql.agent.service import ask
from flexsql.config import Settings
from flexsql.server.prompts import register_prompts
from flexsql.server.sessions import SessionState
from flexsql.server.toolkit import READ_ONLY, WRITES_STORE, mcp_handler
from flexsql.tools.catalog import ListSources, ListTables, list_sources, list_tables
from flexsql.tools.engines import SourceRegistry
from flexsql.tools.runtime.registry import Tools, ToolSpec, python_enabled
from flexsql.tools.toolbox import TOOLS

SERVED = TOOLS.with_tools(ask)
"""What the server offers: every tool, the agent last."""


def build_server(
    settings: Settings,
    sources: SourceRegistry,
    allow_python: bool = True,
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
    tools: Tools = SERVED,
) -> MCPServer:
    """`allow_python` is the transport's default for run_python (on for stdio and loopback HTTP);
    `settings.sandbox.enabled` overrides it either way. `tools`: what to offer (all of flexsql's)."""
    state = SessionState(sources, settings)
    engines = {s.dialect: s.engine for s in sources}
    instructions = (
        "flexsql gives read-only, token-frugal access to databases for answering questions with SQL. "
        "Work FlexSQL-style: search_schema / list_tables / describe_table to find tables; distinct_values / "
        "find_values to ground codes, enums and IDs to exact stored literals; run_query to test pieces; "
        "run_python for logic easier in pandas; compare_results to check candidate answers agree.\n"
        "Sources (every tool takes source=NAME; default: the first): "
        + ", ".join(f"{s.name} ({s.dialect})" for s in sources)
        + "\n"
        + "\n".join(engines[d].notes for d in sorted(engines))
    )
    server = MCPServer(
        name="flexsql",
        version=__version__,
        instructions=instructions,
        token_verifier=token_verifier,
        auth=auth,
    )
    server.flexsql_state = state  # type: ignore[attr-defined]  # tests and the CLI reach the contexts

    python = python_enabled(settings, allow_python)
    served = tools.available(python)
    for spec in served:
        slot = state.agent_runs.hold if spec.name == ask.tool_spec.name else None  # server-wide ceiling
        annotations = WRITES_STORE if spec.writes else READ_ONLY
        server.tool(name=spec.name, description=spec.describe(settings), annotations=annotations)(
            mcp_handler(spec, state.context_for, settings, python, state.principal_for, slot)
        )
        _publish_schemas(server, spec)
    register_prompts(server, frozenset(spec.name for spec in served))
    _register_resources(server, state)
    return server


def _publish_schemas(server: MCPServer, spec: ToolSpec) -> None:
    """Replace the SDK's schemas derived from the handler's signature with the registry's compact ones."""
    registered = server._tool_manager.get_tool(spec.name)  # noqa: SLF001 - the SDK has no public setter
    if registered is None:  # registered just before this call
        raise RuntimeError(f"tool {spec.name} is not registered")
    registered.parameters = spec.input_schema()
    registered.fn_metadata.output_schema = spec.output_schema()


def _register_resources(server: MCPServer, state: SessionState) -> None:
    @server.resource(
        "flexsql://sources", name="sources", description="the configured sources", mime_type="text/plain"
    )
    def sources_resource() -> str:
        return list_sources(state.new_context(), ListSources()).to_text()

    @server.resource(
        "flexsql://schema/{source}",
        name="schema",
        description="compact schema overview of one source",
        mime_type="text/plain",
    )
    def schema_resource(source: str) -> str:
        tc = state.new_context()
        listing = list_tables(tc, ListTables(limit=200, source=source))
        return f"source {source}\n" + listing.to_text()
