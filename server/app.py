"""The MCP server: registers flexsql's tools, prompts and resources on an `MCPServer`.

Every tool is a thin async wrapper: it finds the session's ToolContext, runs the plain tool
function in a worker thread (so a cancelled call cancels its query on the engine), and returns
the result model as structured content plus its compact text. Every failure a model should read
becomes a ToolError with the message (mcp 2.x drops the text of other exceptions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from flexsql import __version__
from flexsql.config import Settings
from flexsql.server.analysis import register_analysis_tools
from flexsql.server.prompts import register_prompts
from flexsql.server.sessions import SessionState
from flexsql.server.toolkit import READ_ONLY, SourceArg, run_tool
from flexsql.tools import catalog as catalog_tools
from flexsql.tools import joins, query, validate
from flexsql.tools.sources import SourceRegistry

DIALECT_NOTES = {
    "duckdb": "DuckDB: double quotes are identifiers, single quotes are strings; ILIKE, regexp_matches, "
              "strftime(date, '%Y'), date_trunc('month', d), list/struct columns (unnest, s.field), QUALIFY.",
    "sqlite": "SQLite: dates are TEXT (strftime('%Y', d), date(d)); no ILIKE (LIKE is case-insensitive for ASCII); "
              "|| concatenates; integer division truncates (CAST(x AS REAL)).",
    "postgres": "PostgreSQL: identifiers fold to lower case unless quoted; ILIKE; date_trunc, EXTRACT; "
                "::type casts; integer division truncates.",
    "snowflake": "Snowflake: unquoted identifiers are UPPER case; VARIANT paths col:field::string, "
                 "LATERAL FLATTEN(input => col); ILIKE; DATE_TRUNC; QUALIFY; sharded tables → UNION ALL or wildcards.",
}


def build_server(settings: Settings, sources: SourceRegistry, allow_python: bool = True,
                 token_verifier: Any = None, auth: Any = None) -> MCPServer:
    """`allow_python` is the transport's default for run_python (on for stdio and loopback HTTP);
    `settings.sandbox.enabled` overrides it either way."""
    state = SessionState(sources, settings)
    notes = sorted({s.dialect for s in sources})
    instructions = (
        "flexsql gives read-only, token-frugal access to databases for answering questions with SQL. "
        "Work FlexSQL-style: search_schema / list_tables / describe_table to find tables; distinct_values / "
        "find_values to ground codes, enums and IDs to exact stored literals; run_query to test pieces; "
        "run_python for logic easier in pandas; compare_results to check candidate answers agree.\n"
        "Sources: " + ", ".join(f"{s.name} ({s.dialect})" for s in sources) + "\n"
        + "\n".join(DIALECT_NOTES[d] for d in notes if d in DIALECT_NOTES)
    )
    server = MCPServer(name="flexsql", version=__version__, instructions=instructions, token_verifier=token_verifier,
                       auth=auth)
    server.flexsql_state = state  # type: ignore[attr-defined]  # tests and the CLI reach the contexts

    def tool(name: str, description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return server.tool(name=name, description=description, annotations=READ_ONLY)

    @tool("list_sources", "List the configured databases: name, SQL dialect, URL (secrets removed), description.")
    async def list_sources(ctx: Context) -> Annotated[CallToolResult, catalog_tools.SourceList]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: catalog_tools.list_sources(tc))

    @tool("list_schemas", "List the schemas of a source with their table and view counts.")
    async def list_schemas(ctx: Context, source: SourceArg = None) -> Annotated[CallToolResult, catalog_tools.SchemaList]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: catalog_tools.list_schemas(tc, source))

    @tool("list_tables", "List tables and views with row estimates and comments, 50 per page (limit ≤ 1000), "
                         "with next_cursor for the next page. Sharded families (EVENTS_20240101 … with identical "
                         "columns) are collapsed into one entry with their count and range.")
    async def list_tables(
        ctx: Context,
        schema: Annotated[str | None, Field(description="only this schema")] = None,
        pattern: Annotated[str | None, Field(description="name filter: substring, or glob with * / %")] = None,
        limit: Annotated[int, Field(description="entries per page, 1-1000")] = 50,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page")] = None,
        source: SourceArg = None,
        refresh: Annotated[bool, Field(description="read the catalog again (after tables changed)")] = False,
    ) -> Annotated[CallToolResult, catalog_tools.TableList]:
        tc = state.context_for(ctx)

        def work() -> catalog_tools.TableList:
            if refresh:
                tc.source(source).catalog(refresh=True)
            return catalog_tools.list_tables(tc, schema, pattern, limit, cursor, source)

        return await run_tool(work)

    @tool("describe_table", "Describe one table: columns with type, nullability, primary/foreign keys, comments "
                            "and 3 example values each (at most 300 columns shown). Names may be bare or "
                            "schema-qualified, case-insensitive.")
    async def describe_table(
        ctx: Context, table: Annotated[str, Field(description="table name, e.g. orders or sales.orders")],
        source: SourceArg = None,
    ) -> Annotated[CallToolResult, catalog_tools.TableDescription]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: catalog_tools.describe_table(tc, table, source))

    @tool("find_join_path", "Join conditions connecting 2-20 tables: declared foreign keys first, then joins "
                            "inferred from column names (marked inferred), with intermediate tables and a FROM/JOIN "
                            "snippet.")
    async def find_join_path(
        ctx: Context, tables: Annotated[list[str], Field(description="the tables to connect")], source: SourceArg = None,
    ) -> Annotated[CallToolResult, joins.JoinPath]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: joins.find_join_path(tc, tables, source))

    @tool("sample_rows", "A few rows of a table (limit 1-1000, default 10), optionally some columns and a WHERE "
                         "condition; cells cut at 200 characters, text output at most 4,000 characters.")
    async def sample_rows(
        ctx: Context, table: Annotated[str, Field(description="table name")],
        columns: Annotated[list[str] | None, Field(description="columns to show; default all")] = None,
        where: Annotated[str | None, Field(description="a SQL condition, e.g. status = 'S'")] = None,
        limit: Annotated[int, Field(description="rows, 1-1000")] = 10,
        source: SourceArg = None,
    ) -> Annotated[CallToolResult, query.QueryOutput]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: query.sample_rows(tc, table, columns, where, limit, source))

    @tool("run_query", "Run one read-only SQL statement (SELECT/WITH/VALUES/SHOW/DESCRIBE/EXPLAIN; writes and "
                       "file/network functions are refused). Returns the first max_rows rows (default 20, at most "
                       "100,000; text shows what fits in 4,000 characters, cells cut at 200), the total row count "
                       "(or a lower bound), truncated, elapsed ms and a result_id for fetch_rows, compare_results and "
                       "run_python. Default timeout 30 s; the query is cancelled on the engine at the timeout.")
    async def run_query(
        ctx: Context, sql: Annotated[str, Field(description="one SQL statement in the source's dialect")],
        max_rows: Annotated[int | None, Field(description="rows to return, 0-100000; default 20")] = None,
        timeout_s: Annotated[float | None, Field(description="seconds before the query is cancelled; default 30")] = None,
        source: SourceArg = None,
    ) -> Annotated[CallToolResult, query.QueryOutput]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: query.run_query(tc, sql, max_rows, timeout_s, source))

    @tool("fetch_rows", "More rows of an earlier result by result_id, without running the query again "
                        "(limit 1-100,000, default 100).")
    async def fetch_rows(
        ctx: Context, result_id: Annotated[str, Field(description="result_id from run_query or run_python")],
        offset: Annotated[int, Field(description="first row, 0-based")] = 0,
        limit: Annotated[int, Field(description="rows, 1-100000")] = 100,
    ) -> Annotated[CallToolResult, query.QueryOutput]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: query.fetch_rows(tc, result_id, offset, limit))

    @tool("validate_sql", "Check SQL without running it: syntax (with position), the read-only guard, table names "
                          "against the catalog, then the engine's EXPLAIN (binds columns and types). Unknown names "
                          "get did-you-mean suggestions; common dialect mistakes get a hint.")
    async def validate_sql(
        ctx: Context, sql: Annotated[str, Field(description="one SQL statement")], source: SourceArg = None,
    ) -> Annotated[CallToolResult, validate.Validation]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: validate.validate_sql(tc, sql, source))

    register_analysis_tools(server, state, tool, allow_python=allow_python)
    register_prompts(server)
    _register_resources(server, state)
    return server


def _register_resources(server: MCPServer, state: SessionState) -> None:
    @server.resource("flexsql://sources", name="sources", description="the configured sources",
                     mime_type="text/plain")
    def sources_resource() -> str:
        return catalog_tools.list_sources(state.new_context()).to_text()

    @server.resource("flexsql://schema/{source}", name="schema", description="compact schema overview of one source",
                     mime_type="text/plain")
    def schema_resource(source: str) -> str:
        tc = state.new_context()
        listing = catalog_tools.list_tables(tc, limit=200, source=source)
        return f"source {source}\n" + listing.to_text()
