"""MCP wrappers for the analysis tools: schema search, value inspection, result comparison and
sandboxed Python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from flexsql.server.toolkit import SourceArg, progress_bridge, run_tool
from flexsql.tools import compare, python_tool, search, values


def register_analysis_tools(server: MCPServer, state: Any, tool: Callable[..., Any], allow_python: bool) -> None:
    @tool("search_schema", "Rank tables and columns for a natural-language question or keywords across the whole "
                           "catalog (identifier splitting, stemming, comments, values seen in the data, foreign-key "
                           "neighbours); each hit says why it matched. limit 1-100, default 10.")
    async def search_schema(
        ctx: Context, query: Annotated[str, Field(description="the question or keywords")],
        limit: Annotated[int, Field(description="hits per kind, 1-100")] = 10, source: SourceArg = None,
    ) -> Annotated[CallToolResult, search.SchemaSearchResult]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: search.search_schema(tc, query, limit, source))

    @tool("find_values", "Which table.column holds values like `text`: exact, case-insensitive and fuzzy matches "
                         "(typos, word order, partial) with the stored spelling and its count. Uses a value index "
                         "(built on first use, with progress) and a bounded live query for columns it does not "
                         "cover. limit 1-100, default 10.")
    async def find_values(
        ctx: Context, text: Annotated[str, Field(description="the value to look for, e.g. France or 'shipped'")],
        tables: Annotated[list[str] | None, Field(description="only these tables")] = None,
        limit: Annotated[int, Field(description="matches, 1-100")] = 10, source: SourceArg = None,
        refresh: Annotated[bool, Field(description="rebuild the value index first (after the data changed)")] = False,
    ) -> Annotated[CallToolResult, values.FindValuesResult]:
        tc = state.context_for(ctx)
        report = progress_bridge(ctx)

        def work() -> values.FindValuesResult:
            if refresh:
                values.build_value_index(tc, source, progress=report, refresh=True)
            return values.find_values(tc, text, tables, limit, source, progress=report)

        return await run_tool(work)

    @tool("distinct_values", "Distinct values of a column by frequency, with counts (limit 1-100, default 20), "
                             "optionally only those containing a substring (case-insensitive). Large tables are "
                             "sampled, and the result says so.")
    async def distinct_values(
        ctx: Context, table: Annotated[str, Field(description="table name")],
        column: Annotated[str, Field(description="column name")],
        contains: Annotated[str | None, Field(description="case-insensitive substring filter")] = None,
        limit: Annotated[int, Field(description="values, 1-100")] = 20, source: SourceArg = None,
    ) -> Annotated[CallToolResult, values.DistinctValuesResult]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: values.distinct_values(tc, table, column, contains, limit, source))

    @tool("profile_column", "Profile a column: type, NULL fraction, distinct count, min/max, most frequent values "
                            "with counts, value patterns (e.g. AA-9999, dates as text, JSON). Large tables are "
                            "sampled or use approximate counts, and the result says so.")
    async def profile_column(
        ctx: Context, table: Annotated[str, Field(description="table name")],
        column: Annotated[str, Field(description="column name")], source: SourceArg = None,
    ) -> Annotated[CallToolResult, values.ColumnProfile]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: values.profile_column(tc, table, column, source))

    @tool("compare_results", "Whether 2-10 results (result_ids) are equivalent: rows compared as multisets unless "
                             "a result is ordered, columns matched one-to-one by content (names ignored), numbers "
                             "within 0.01, NULL equal only to NULL. Groups equivalent results and says how the others "
                             "differ (row counts, unmatched columns, sample rows).")
    async def compare_results(
        ctx: Context, result_ids: Annotated[list[str], Field(description="result_ids from run_query / run_python")],
    ) -> Annotated[CallToolResult, compare.Comparison]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: compare.compare_results(tc, result_ids))

    enabled = state.settings.sandbox.enabled
    if enabled is None:
        enabled = allow_python
    if not enabled:
        return

    @tool("run_python", python_tool.run_python_description(state.settings.sandbox))
    async def run_python(
        ctx: Context, code: Annotated[str, Field(description="Python source; the last expression is the result")],
        result_ids: Annotated[list[str] | None, Field(description="results to load as DataFrames")] = None,
        timeout_s: Annotated[float | None, Field(description="wall-clock seconds, at most the configured limit")] = None,
    ) -> Annotated[CallToolResult, python_tool.PythonResult]:
        tc = state.context_for(ctx)
        return await run_tool(lambda: python_tool.run_python(tc, code, result_ids, timeout_s))
